"""RmsNorm fused with MX quantisation of its output (RmsNormDynamicMxQuant, AddRmsNormDynamicMxQuant):

    [x = x1 + x2]   y = x / rms(x) * gamma [+ beta]   (float32, stored in x's dtype)   ->
    (y_mx, mxscale) = MX-quantise(y, last dim)

as Ascend 950's kernels compute it: y is written to the unified buffer in x's dtype (float16 / bfloat16) and the MX
quantisation reads it from there (ops-nn's golden casts it the same way).

MX quantisation as npu_dynamic_mx_quant's, in blocks of 32 along the last dim (dst_type FP8 e5m2 / e4m3fn or
packed FP4 e2m1 / e1m2, the default 296; round_mode rint, round or floor for FP4; scale_alg 0). rstd (float32,
the normalised dims kept as 1) is returned when the inputs require grad, an empty tensor otherwise, as the card
skips writing it.

    npu_rms_norm_dynamic_mx_quant      -> (y, mxscale, rstd)
    npu_add_rms_norm_dynamic_mx_quant  -> (y, x, mxscale, rstd)      x = x1 + x2 in x1's dtype
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.mx_quant import mx_quantised
from torch_npu.ops.norms import rms_statistics
from torch_npu.ops.registration import npu_op

__all__ = []


def _normalised_mx(x, gamma, beta, epsilon, scale_alg, round_mode, dst_type, want_rstd, op):
    check(1 <= x.dim() <= 7, op, f"x must have 1 to 7 dims, got {x.dim()}")
    xf, rstd = rms_statistics(x, gamma, epsilon, op)
    y = xf * rstd * gamma.float()
    if beta is not None:
        y = y + beta.float()
    y = y.to(x.dtype)
    quantised, mxscale = mx_quantised(y, -1, round_mode, dst_type, 32, scale_alg, op=op)
    return quantised, mxscale, rstd if want_rstd else x.new_empty(0, dtype=torch.float32)


@npu_op(
    "npu_rms_norm_dynamic_mx_quant(Tensor x, Tensor gamma, *, Tensor? beta=None, float epsilon=1e-06, "
    'int scale_alg=0, str round_mode="rint", int dst_type=296) -> (Tensor, Tensor, Tensor)'
)
def npu_rms_norm_dynamic_mx_quant(x, gamma, *, beta=None, epsilon=1e-6, scale_alg=0, round_mode="rint", dst_type=296):
    """(y, mxscale, rstd)."""
    op = "npu_rms_norm_dynamic_mx_quant"
    return _normalised_mx(x, gamma, beta, epsilon, scale_alg, round_mode, dst_type, x.requires_grad, op)


@npu_op(
    "npu_add_rms_norm_dynamic_mx_quant(Tensor x1, Tensor x2, Tensor gamma, *, Tensor? beta=None, "
    'float epsilon=1e-06, int scale_alg=0, str round_mode="rint", int dst_type=296) '
    "-> (Tensor, Tensor, Tensor, Tensor)"
)
def npu_add_rms_norm_dynamic_mx_quant(x1, x2, gamma, *, beta=None, epsilon=1e-6, scale_alg=0, round_mode="rint",
                                      dst_type=296):  # fmt: skip
    """(y, x, mxscale, rstd)."""
    op = "npu_add_rms_norm_dynamic_mx_quant"
    check(x1.shape == x2.shape, op, "The shape of x1 and x2 must be the same")
    check(x1.requires_grad == x2.requires_grad, op, "The requires_grad of x1 and x2 must be consistent")
    x = x1 + x2
    y, mxscale, rstd = _normalised_mx(x, gamma, beta, epsilon, scale_alg, round_mode, dst_type, x1.requires_grad, op)
    return y, x, mxscale, rstd
