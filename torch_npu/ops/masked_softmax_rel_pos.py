"""npu_masked_softmax_with_rel_pos_bias: Swin Transformer's window-attention softmax (MaskedSoftmaxWithRelPosBias).

    out = softmax(scale_value * x + atten_mask + relative_pos_bias)     over the last dim

x (B*W, N, S1, S2) or (B, W, N, S1, S2); atten_mask (W, S1, S2) / (W, 1, S1, S2) / (1, W, 1, S1, S2), applied per
window; relative_pos_bias (N, S1, S2) / (1, N, S1, S2) / (1, 1, N, S1, S2), per head. Computed in float32 (both
inner_precision_mode values), returned in x's dtype.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_masked_softmax_with_rel_pos_bias"


@npu_op(
    "npu_masked_softmax_with_rel_pos_bias(Tensor x, Tensor? atten_mask, Tensor relative_pos_bias, "
    "float scale_value=1.0, int inner_precision_mode=0) -> Tensor",
    fake=lambda x, atten_mask, relative_pos_bias, scale_value=1.0, inner_precision_mode=0: torch.empty_like(x),
)
def npu_masked_softmax_with_rel_pos_bias(x, atten_mask, relative_pos_bias, scale_value=1.0, inner_precision_mode=0):
    """softmax(scale_value * x + atten_mask + relative_pos_bias) along the last dim."""
    check(x.dim() in (4, 5), _OP, f"x must be 4-D (B*W, N, S1, S2) or 5-D (B, W, N, S1, S2), got {x.dim()}-D")
    check(inner_precision_mode in (0, 1), _OP, f"inner_precision_mode must be 0 or 1, got {inner_precision_mode}")
    n, s1, s2 = x.shape[-3:]
    bias = relative_pos_bias.float().reshape(-1, n, s1, s2)
    check(bias.shape[0] == 1, _OP, f"relative_pos_bias must hold [N={n}, S1={s1}, S2={s2}], got {tuple(relative_pos_bias.shape)}")  # fmt: skip
    scores = x.float() * scale_value
    if atten_mask is not None:
        mask = atten_mask.float().reshape(-1, 1, s1, s2)  # [W, 1, S1, S2]
        windows = mask.shape[0]
        check(windows > 0 and (x.shape[1] == windows if x.dim() == 5 else x.shape[0] % windows == 0), _OP,
              f"atten_mask's {windows} windows do not divide x's leading dims {tuple(x.shape[:-3])}")  # fmt: skip
        grouped = scores.reshape(-1, windows, n, s1, s2) + mask
        scores = grouped.reshape(scores.shape)
    return torch.softmax(scores + bias[0], dim=-1).to(x.dtype)
