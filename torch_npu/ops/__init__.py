"""torch_npu's operators (torch.ops.npu.*, re-exported as torch_npu.<name>), defined with
torch.library: each has an npu kernel composed of ATen operators, a fake kernel, and a backward
where torch_npu defines one. `npu_op` (registration.py) is the public way to add your own."""

from torch_npu.ops import (  # noqa: F401
    activations,
    attention_infer,
    attention_infer_v2,
    attention_update,
    boxes,
    convolutions,
    dropout_masks,
    dynamic_quant,
    float_status,
    format_cast,
    fusion_attention,
    fusion_attention_v2,
    grouped_matmul_add,
    grouped_matmul_finalize_routing,
    ifmr,
    kv_cache,
    losses,
    matmul_collectives,
    moe,
    moe_gating_backward,
    moe_init_routing_v2,
    moe_routing_map,
    multi_head_attention,
    norm_quant,
    norms,
    optimizer_ops,
    ps_roi_pooling,
    quant,
    quant_matmul_gelu,
    quant_param,
    quant_scatter,
    reduction_slicing,
    rnn_layers,
    rope,
    rotated_boxes,
    sampling,
    swiglu_quant,
    tensor_ops,
    top_k_top_p_sample,
    transpose_batchmatmul,
)
from torch_npu.ops.registration import npu_op

__all__ = ["npu_op"]
