"""Dynamic quantisation (the scale comes from the data): npu_dynamic_quant (symmetric) and
npu_dynamic_quant_asymmetric, per token (each row of the last dim) or per tensor, as CANN's
DynamicQuant / DynamicQuantV2 compute them, and npu_dynamic_block_quant (symmetric, per block):

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

__all__ = ["block_quantised", "symmetric_dynamic"]

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


# dst_type -> (output dtype, largest magnitude): c10 ScalarType numbers and torch_npu's own (290-292)
_BLOCK_TYPES = {
    1: (torch.int8, 127.0),
    24: (torch.float8_e4m3fn, 448.0),
    23: (torch.float8_e5m2, 57344.0),
    292: (torch.float8_e4m3fn, 448.0),
    291: (torch.float8_e5m2, 57344.0),
    290: ("hifloat8", 32768.0),
}


def _rounded(value, round_mode, op):
    check(round_mode in ("rint", "round"), op, f"round_mode must be 'rint' or 'round', got {round_mode!r}")
    return torch.round(value) if round_mode == "rint" else torch.sign(value) * torch.floor(value.abs() + 0.5)


def _block_dtype(dst_type, op):
    check(
        dst_type in _BLOCK_TYPES,
        op,
        f"dst_type={dst_type}: vnpu quantises to int8 (1), float8_e4m3fn (24 / 292), float8_e5m2 (23 / 291) or "
        "hifloat8 (290)",
    )
    dtype = _BLOCK_TYPES[dst_type][0]
    return torch.uint8 if dtype == "hifloat8" else dtype


def block_quantised(x, min_scale, round_mode, dst_type, row_block_size, col_block_size, dst_type_max, op):
    """(y, scale [.., ceil(M / row_block_size), ceil(N / col_block_size)]) of x's last two dims, block-wise."""
    _block_dtype(dst_type, op)
    check(row_block_size > 0 and col_block_size > 0, op, "row_block_size and col_block_size must be positive")
    dtype, limit = _BLOCK_TYPES[dst_type]
    limit = dst_type_max if dst_type_max > 0 else limit
    m, n = x.shape[-2:]
    rows, cols = -(-m // row_block_size), -(-n // col_block_size)
    xf = x.float()
    padded = torch.nn.functional.pad(xf.abs(), (0, cols * col_block_size - n, 0, rows * row_block_size - m))
    blocks = padded.reshape(*x.shape[:-2], rows, row_block_size, cols, col_block_size)
    scale = blocks.amax(dim=(-3, -1)) / limit
    if min_scale > 0:
        scale = scale.clamp(max=1.0 / min_scale)
    per_element = scale.repeat_interleave(row_block_size, -2).repeat_interleave(col_block_size, -1)[..., :m, :n]
    value = xf / per_element.clamp(min=_TINY)
    if dtype == torch.int8:
        return _rounded(value, round_mode, op).clamp(-128, 127).to(torch.int8), scale
    if dtype == "hifloat8":
        from torch_npu.utils import hifloat8

        check(round_mode == "round", op, f"round_mode must be 'round' for hifloat8, got {round_mode!r}")
        return hifloat8.encode(value), scale
    return value.to(dtype), scale


def _block_quant_fake(
    x, *, min_scale=0.0, round_mode="rint", dst_type=1, row_block_size=1, col_block_size=128, dst_type_max=0.0
):
    rows, cols = -(-x.shape[-2] // row_block_size), -(-x.shape[-1] // col_block_size)
    dtype = _block_dtype(dst_type, "npu_dynamic_block_quant")
    return x.new_empty(x.shape, dtype=dtype), x.new_empty(*x.shape[:-2], rows, cols, dtype=torch.float32)


@npu_op(
    'npu_dynamic_block_quant(Tensor x, *, float min_scale=0.0, str round_mode="rint", int dst_type=1, '
    "int row_block_size=1, int col_block_size=128, float dst_type_max=0.0) -> (Tensor y, Tensor scale)",
    fake=_block_quant_fake,
    dtypes={"x": (torch.float16, torch.bfloat16)},
    api="aclnnDynamicBlockQuant",
)
def npu_dynamic_block_quant(
    x, *, min_scale=0.0, round_mode="rint", dst_type=1, row_block_size=1, col_block_size=128, dst_type_max=0.0
):
    """Block-wise dynamic quantisation of the last two dims of x ([M, N] or [B, M, N]) in blocks of
    row_block_size x col_block_size: scale = max|x| over the block / DST_MAX (capped at 1 / min_scale when
    min_scale > 0), y = x / scale rounded (round_mode 'rint': half to even, 'round': half away from zero) to
    int8 (dst_type 1, DST_MAX 127) or cast to float8_e4m3fn (24 or 292, 448) / float8_e5m2 (23 or 291, 57344) /
    hifloat8 (290, 32768, uint8 codes, round_mode "round"). Returns (y,
    scale float32 [..., ceil(M / row_block_size), ceil(N / col_block_size)])."""
    op = "npu_dynamic_block_quant"
    check(x.dim() in (2, 3), op, f"x must be 2-D or 3-D, got {x.dim()}-D")
    return block_quantised(x, min_scale, round_mode, dst_type, row_block_size, col_block_size, dst_type_max, op)
