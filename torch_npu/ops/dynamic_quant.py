"""Dynamic quantisation (the scale comes from the data): npu_dynamic_quant (symmetric) and
npu_dynamic_quant_asymmetric, per token (each row of the last dim) or per tensor, as CANN's
DynamicQuant / DynamicQuantV2 compute them:

* symmetric:  scale = max|x| / DST_MAX,                     y = round(x / scale)
* asymmetric: scale = (max x - min x) / (DST_MAX - DST_MIN), offset = DST_MAX - max x / scale,
              y = round(x / scale + offset)

DST_MAX/DST_MIN are 127/-128 for int8 and 7/-8 for int4 (dst_type=torch.quint4x2, eight values packed in
each int32). Smooth quant multiplies x by smooth_scales first; with group_index (MoE) smooth_scales holds
one row per expert and row i of it scales the tokens group_index[i-1] <= t < group_index[i] (group_index is
cumulative, the first group starts at token 0).
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dtype_support import FLOATS
from torch_npu.ops.quant import INT4_RANGE, packs_int4, quantised
from torch_npu.ops.registration import npu_op

__all__ = ["symmetric_dynamic"]

_INT8_RANGE = (-128, 127)
_MODES = ("pertoken", "pertensor")
_TINY = 1e-12  # a constant row quantises to its extreme instead of dividing by zero


def _range(dst, op, argument):
    return INT4_RANGE if packs_int4(dst, op, argument) else _INT8_RANGE


def _smoothed(x, smooth_scales, group_index, op):
    xf = x.float()
    if smooth_scales is None:
        return xf
    if group_index is None:
        return xf * smooth_scales.float()
    rows = xf.reshape(-1, xf.shape[-1])
    ends = group_index.long()
    check(
        smooth_scales.dim() == 2 and smooth_scales.shape[0] == ends.numel(),
        op,
        f"with group_index, smooth_scales must hold one row per group ({ends.numel()}), got "
        f"{tuple(smooth_scales.shape)}",
    )
    check(
        ends.numel() > 0 and int(ends[-1]) == rows.shape[0],
        op,
        f"group_index must end at the number of tokens ({rows.shape[0]}), got {ends.tolist()}",
    )
    expert = torch.bucketize(torch.arange(rows.shape[0], device=x.device), ends, right=True)
    return (rows * smooth_scales.float()[expert]).reshape(xf.shape)


def _row_stat(fn, xf, quant_mode):
    return fn(xf) if quant_mode == "pertensor" else fn(xf, -1)


def symmetric_dynamic(value, dst, op, argument, dst_type_max=0.0, quant_mode="pertoken"):
    """(y, scale): value (float32) quantised with scale = max|value| / DST_MAX per row (or per tensor)."""
    limit = dst_type_max if dst_type_max > 0 else float(_range(dst, op, argument)[1])
    scale = _row_stat(torch.amax, value.abs(), quant_mode).clamp(min=_TINY) / limit
    per_element = scale if quant_mode == "pertensor" else scale.unsqueeze(-1)
    return quantised(value / per_element, dst, op, argument), scale.reshape(1) if quant_mode == "pertensor" else scale


def _outputs_fake(x, dst_type, quant_mode, op, count):
    packed = packs_int4(dst_type, op, "dst_type")
    y = x.new_empty(
        *x.shape[:-1], x.shape[-1] // 8 if packed else x.shape[-1], dtype=torch.int32 if packed else torch.int8
    )
    stats = [
        x.new_empty((1,) if quant_mode == "pertensor" else x.shape[:-1], dtype=torch.float32) for _ in range(count)
    ]
    return (y, *stats)


def _check_mode(quant_mode, op):
    check(quant_mode in _MODES, op, f"quant_mode must be 'pertoken' or 'pertensor', got {quant_mode!r}")


@npu_op(
    "npu_dynamic_quant(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, int? dst_type=None, "
    "str quant_mode='pertoken', float dst_type_max=0.0) -> (Tensor, Tensor)",
    fake=lambda x, *, smooth_scales=None, group_index=None, dst_type=None, quant_mode="pertoken", dst_type_max=0.0: (
        _outputs_fake(x, dst_type, quant_mode, "npu_dynamic_quant", 1)
    ),
    dtypes={"input": FLOATS},
    api="aclnnDynamicQuantV2",
)
def npu_dynamic_quant(
    x, *, smooth_scales=None, group_index=None, dst_type=None, quant_mode="pertoken", dst_type_max=0.0
):
    """Symmetric dynamic quantisation: returns (y, scale float32 of x.shape[:-1], or [1] per tensor)."""
    op = "npu_dynamic_quant"
    _check_mode(quant_mode, op)
    xf = _smoothed(x, smooth_scales, group_index, op)
    return symmetric_dynamic(xf, dst_type, op, "dst_type", dst_type_max, quant_mode)


@npu_op(
    "npu_dynamic_quant_asymmetric(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, "
    'int? dst_type=None, str quant_mode="pertoken", float dst_type_max=0.0) -> (Tensor, Tensor, Tensor)',
    fake=lambda x, *, smooth_scales=None, group_index=None, dst_type=None, quant_mode="pertoken", dst_type_max=0.0: (
        _outputs_fake(x, dst_type, quant_mode, "npu_dynamic_quant_asymmetric", 2)
    ),
    dtypes={"input": (torch.float16, torch.bfloat16)},
    api="aclnnDynamicQuantV2",
)
def npu_dynamic_quant_asymmetric(
    x, *, smooth_scales=None, group_index=None, dst_type=None, quant_mode="pertoken", dst_type_max=0.0
):
    """Asymmetric dynamic quantisation: returns (y, scale, offset), scale and offset float32 of
    x.shape[:-1] (or [1] per tensor)."""
    op = "npu_dynamic_quant_asymmetric"
    _check_mode(quant_mode, op)
    check(x.dim() > 1, op, f"The dimension of input x must be greater than 1, got {x.dim()}")
    low, high = _range(dst_type, op, "dst_type")
    xf = _smoothed(x, smooth_scales, group_index, op)
    row_max, row_min = _row_stat(torch.amax, xf, quant_mode), _row_stat(torch.amin, xf, quant_mode)
    scale = (row_max - row_min).clamp(min=_TINY) / float(high - low)
    offset = high - row_max / scale
    per_row = (lambda t: t) if quant_mode == "pertensor" else (lambda t: t.unsqueeze(-1))
    y = quantised(xf / per_row(scale) + per_row(offset), dst_type, op, "dst_type")
    if quant_mode == "pertensor":
        return y, scale.reshape(1), offset.reshape(1)
    return y, scale, offset
