"""torch_npu.atb: op-plugin's ATB operators that torch_npu offers under this module rather than as torch_npu.<name>
(npu_paged_cache_load, npu_fused_add_topk_div, ...). Each is torch.ops.atb.<name>; the operator definitions add
themselves here (torch_npu.ops.registration)."""

__all__ = []
