"""torch_npu.matmul_checksum: does c look like a @ b, or did the AI Core corrupt it?

The row sums of c are compared with a @ (row sums of b), computed in float32. A correct bfloat16 result
differs from that only by the rounding of its elements (at most half a bfloat16 ulp of the row's largest
magnitude each) and float32 accumulation; a larger difference means the result is corrupt."""

import torch

from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = []

_BF16_HALF_ULP = 2.0**-8  # relative rounding of one bfloat16 element
_ACCUMULATION_SLACK = 4.0  # float32 sums of both sides and the reference matmul's own rounding


def _matmul_checksum(a, b, c):
    """A bool scalar tensor on npu: True when c differs from a @ b by more than rounding can explain."""
    for t in (a, b, c):
        if not isinstance(t, torch.Tensor) or t.device.type != "npu":
            raise TypeError("tensor should be torch.Tensor, and device type should be npu" + pta_error(ErrCode.PARAM))
    c_sum = c.sum(dim=-1, dtype=torch.float32)
    expected = torch.matmul(a.float(), b.sum(dim=-1, keepdim=True, dtype=torch.float32)).squeeze(-1)
    row_max = c.abs().amax(dim=-1).float()
    a_scale = a.float().abs().amax(dim=-1) * b.float().abs().amax()
    threshold = c.shape[-1] * (_BF16_HALF_ULP * row_max + _ACCUMULATION_SLACK * 2.0**-23 * a.shape[-1] * a_scale)
    return ((c_sum - expected).abs() > threshold + 1e-30).any()
