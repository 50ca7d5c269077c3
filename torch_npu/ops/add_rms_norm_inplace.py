"""npu_add_rms_norm_v2 (+ _functional): AddRmsNorm writing its results over its inputs (InplaceAddRmsNorm):

    x = x1 + x2  -> written into x2;   y = x / rms(x) * gamma  -> written into x1;   returns rstd (float32)

x is rounded to the inputs' dtype (the card stores it), the norm is computed from it in float32 and y rounded
once. The functional form returns (rstd, y, x) and leaves x1 and x2 alone.
"""

import torch

from torch_npu.ops.norms import npu_add_rms_norm
from torch_npu.ops.registration import npu_op

__all__ = []


def _rstd_fake(x1, x2, gamma, epsilon=1e-6):
    kept = x1.dim() - gamma.dim()
    return x1.new_empty([*x1.shape[:kept], *([1] * gamma.dim())], dtype=torch.float32)


@npu_op(
    "npu_add_rms_norm_v2_functional(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) "
    "-> (Tensor, Tensor, Tensor)",
    fake=lambda x1, x2, gamma, epsilon=1e-6: (_rstd_fake(x1, x2, gamma), torch.empty_like(x1), torch.empty_like(x2)),
)
def npu_add_rms_norm_v2_functional(x1, x2, gamma, epsilon=1e-6):
    """(rstd, y, x)."""
    y, rstd, x = npu_add_rms_norm(x1, x2, gamma, epsilon)
    return rstd, y, x.to(x2.dtype)


@npu_op(
    "npu_add_rms_norm_v2(Tensor(a!) x1, Tensor(b!) x2, Tensor gamma, float epsilon=1e-06) -> Tensor",
    fake=_rstd_fake,
)
def npu_add_rms_norm_v2(x1, x2, gamma, epsilon=1e-6):
    """rstd; x1 becomes y, x2 becomes x1 + x2."""
    rstd, y, x = npu_add_rms_norm_v2_functional(x1, x2, gamma, epsilon)
    x1.copy_(y)
    x2.copy_(x)
    return rstd
