"""torch_npu.contrib.function: detection and attention helpers from torch_npu's contrib package."""

from torch_npu.contrib.function.anchor_generator import npu_single_level_responsible_flags
from torch_npu.contrib.function.bbox_coder import (
    npu_bbox_coder_decode_xywh2xyxy,
    npu_bbox_coder_encode_xyxy2xywh,
    npu_bbox_coder_encode_yolo,
)
from torch_npu.contrib.function.fuse_add_softmax_dropout import fuse_add_softmax_dropout
from torch_npu.contrib.function.fused_attention import npu_fused_attention, npu_fused_attention_with_layernorm
from torch_npu.contrib.function.index_op import npu_fast_condition_index_put

# importable from the package, as in torch_npu, though not listed in __all__
from torch_npu.contrib.function.iou import npu_ciou, npu_diou, npu_giou, npu_iou, npu_ptiou  # noqa: F401
from torch_npu.contrib.function.matmul_transpose import matmul_transpose
from torch_npu.contrib.function.nms import npu_batched_multiclass_nms, npu_multiclass_nms
from torch_npu.contrib.function.npu_functional import dropout_with_byte_mask
from torch_npu.contrib.function.roll import roll

__all__ = [
    "npu_single_level_responsible_flags",
    "npu_bbox_coder_decode_xywh2xyxy",
    "npu_bbox_coder_encode_xyxy2xywh",
    "npu_bbox_coder_encode_yolo",
    "fuse_add_softmax_dropout",
    "npu_fused_attention",
    "npu_fused_attention_with_layernorm",
    "npu_fast_condition_index_put",
    "matmul_transpose",
    "npu_batched_multiclass_nms",
    "npu_multiclass_nms",
    "dropout_with_byte_mask",
    "roll",
]
