"""RmsNorm fused with the operator after it: a cast (npu_add_rms_norm_cast), a static quantisation
(npu_rms_norm_quant, npu_add_rms_norm_quant) or a per-row dynamic quantisation
(npu_add_rms_norm_dynamic_quant), as CANN's AddRmsNorm*/RmsNormQuant kernels fuse them.

The normalised value is computed in float32 and quantised from float32 (the fused kernels never round it to
the input dtype in between); quantised values round half to even and saturate. int8 is the default output;
torch.quint4x2 asks for int4 values, eight packed into each int32 (the lowest nibble first), so the last
dim shrinks eightfold. Outputs that torch_npu documents as "of no practical meaning" for a call (y2 without
scales2, the second dynamic quantisation when it is not requested) are zeros on vnpu.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dynamic_quant import symmetric_dynamic
from torch_npu.ops.norms import rms_statistics
from torch_npu.ops.quant import packs_int4, quantised
from torch_npu.ops.registration import npu_op

__all__ = []

_HALF = (torch.float16, torch.bfloat16)


def _rms_norm_f32(x, gamma, beta, epsilon, op):
    """(x / rms(x) * gamma [+ beta] in float32, rstd) over gamma's trailing dims."""
    xf, rstd = rms_statistics(x, gamma, epsilon, op)
    y = xf * rstd * gamma.float()
    return (y if beta is None else y + beta.float()), rstd


def _added(x1, x2, op):
    check(x1.shape == x2.shape, op, f"The shape of x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} must be the same")
    return x1 + x2


@npu_op(
    "npu_rms_norm_quant(Tensor x, Tensor gamma, Tensor beta, Tensor scale, Tensor offset, float epsilon=1e-06, *, "
    "int? dst_dtype=None) -> Tensor",
    dtypes={"x": _HALF, "gamma": _HALF, "beta": _HALF},
    api="aclnnRmsNormQuant",
)
def npu_rms_norm_quant(x, gamma, beta, scale, offset, epsilon=1e-6, *, dst_dtype=None):
    """y = round((x / rms(x) * gamma + beta) * scale + offset), scale/offset per tensor or per last-dim
    element; gamma and beta [D] or [1, D] (D: x's last dim)."""
    op = "npu_rms_norm_quant"
    if gamma.dim() == 2 and gamma.shape[0] == 1:  # RmsNormQuant also takes gamma (and beta) as [1, D]
        gamma, beta = gamma.reshape(-1), beta.reshape(-1) if beta.dim() == 2 and beta.shape[0] == 1 else beta
    y, _ = _rms_norm_f32(x, gamma, beta, epsilon, op)
    return quantised(y * scale.float() + offset.float(), dst_dtype, op, "dst_dtype")


@npu_op(
    "npu_add_rms_norm_cast(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor, Tensor, "
    "Tensor)",
    dtypes={"x1": _HALF, "x2": _HALF, "gamma": _HALF},
    api="aclnnAddRmsNormCast",
)
def npu_add_rms_norm_cast(x1, x2, gamma, epsilon=1e-6):
    """x = x1 + x2; y2 = rms_norm(x) * gamma in x's dtype; returns (y2 as float32, y2, rstd, x)."""
    x = _added(x1, x2, "npu_add_rms_norm_cast")
    y, rstd = _rms_norm_f32(x, gamma, None, epsilon, "npu_add_rms_norm_cast")
    y2 = y.to(x1.dtype)
    return y2.float(), y2, rstd, x


@npu_op(
    "npu_add_rms_norm_quant(Tensor x1, Tensor x2, Tensor gamma, Tensor scales1, Tensor? zero_points1, "
    "Tensor? beta=None, Tensor? scales2=None, Tensor? zero_points2=None, *, int axis=-1, float epsilon=1e-06, "
    "bool div_mode=True, int? dst_type=None) -> (Tensor, Tensor, Tensor)",
    dtypes={"x1": _HALF, "x2": _HALF, "gamma": _HALF},
    api="aclnnAddRmsNormQuantV2",
)
def npu_add_rms_norm_quant(
    x1,
    x2,
    gamma,
    scales1,
    zero_points1,
    beta=None,
    scales2=None,
    zero_points2=None,
    *,
    axis=-1,
    epsilon=1e-6,
    div_mode=True,
    dst_type=None,
):
    """x = x1 + x2; y = rms_norm(x) * gamma [+ beta]; yk = round(y / scalesk + zero_pointsk) (div_mode) or
    round(y * scalesk + zero_pointsk); returns (y1, y2, x). Without scales2, y2 is zeros."""
    op = "npu_add_rms_norm_quant"
    check(axis == -1, op, "axis only support -1.")
    x = _added(x1, x2, op)
    y, _ = _rms_norm_f32(x, gamma, beta, epsilon, op)

    def quantise(scales, zero_points):
        value = y / scales.float() if div_mode else y * scales.float()
        if zero_points is not None:
            value = value + zero_points.float()
        return quantised(value, dst_type, op, "dst_type")

    y1 = quantise(scales1, zero_points1)
    y2 = quantise(scales2, zero_points2) if scales2 is not None else torch.zeros_like(y1)
    return y1, y2, x


@npu_op(
    "npu_add_rms_norm_dynamic_quant(Tensor x1, Tensor x2, Tensor gamma, *, Tensor? smooth_scale1=None, "
    "Tensor? smooth_scale2=None, Tensor? beta=None, float epsilon=1e-6, bool[2]? output_mask=None, "
    "int? y_dtype=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    dtypes={"x1": _HALF, "x2": _HALF, "gamma": _HALF},
    api="aclnnAddRmsNormDynamicQuantV2",
)
def npu_add_rms_norm_dynamic_quant(
    x1, x2, gamma, *, smooth_scale1=None, smooth_scale2=None, beta=None, epsilon=1e-6, output_mask=None, y_dtype=None
):
    """x = x1 + x2; y = rms_norm(x) * gamma [+ beta]; for k = 1, 2: inputk = y * smooth_scalek,
    scalek = row_max(|inputk|) / 127 (float32, x's shape without the last dim), yk = round(inputk / scalek).
    Returns (y1, y2, x, scale1, scale2). output_mask chooses which of y1/y2 are computed; without it y1 is,
    and y2 only when both smooth scales are given. Outputs not computed are 0-dim zeros."""
    op = "npu_add_rms_norm_dynamic_quant"
    check(2 <= x1.dim() <= 8, op, "The x1 should be in 2~8D")
    check(2 <= x2.dim() <= 8, op, "The x2 should be in 2~8D")
    if output_mask is not None:
        check(any(output_mask), op, "When the output_mask is not empty, at least one of y1 and y2 must be output.")
        wanted = (bool(output_mask[0]), bool(output_mask[1]))
    else:
        wanted = (True, smooth_scale1 is not None and smooth_scale2 is not None)
    x = _added(x1, x2, op)
    y, _ = _rms_norm_f32(x, gamma, beta, epsilon, op)
    outputs = []
    for smooth, want in ((smooth_scale1, wanted[0]), (smooth_scale2, wanted[1])):
        if want:
            outputs.append(symmetric_dynamic(y if smooth is None else y * smooth.float(), y_dtype, op, "y_dtype"))
        else:
            dtype = torch.int32 if packs_int4(y_dtype, op, "y_dtype") else torch.int8
            outputs.append((y.new_zeros((), dtype=dtype), y.new_zeros(())))
    (y1, scale1), (y2, scale2) = outputs
    return y1, y2, x, scale1, scale2
