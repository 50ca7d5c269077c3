"""Quantisation and quantised matmul operators: npu_quant_matmul, npu_weight_quant_batchmatmul,
npu_quantize, npu_anti_quant, npu_convert_weight_to_int4pack, npu_grouped_matmul.

Integer products accumulate exactly (int8 x int8 -> int32 range); int8 outputs round half to even and
saturate to [-128, 127]."""

import torch

from torch_npu.ops._common import check, dtype_of
from torch_npu.ops.dtype_support import FLOATS
from torch_npu.ops.registration import npu_op

_SCALAR_TYPE_COUNT = 46  # c10::ScalarType::NumOptions in PyTorch 2.13 (Float4_e2m1fn_x2 is 45)

__all__ = [
    "INT4_RANGE",
    "group_row_counts",
    "int_accumulate",
    "int_matmul",
    "pack_int4",
    "packs_int4",
    "quantised",
    "requantize",
    "unpack_int4",
]

_INT_RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255), torch.int32: (-(2**31), 2**31 - 1)}
_QUANT_DTYPES = {12: torch.int8, 13: torch.uint8, 14: torch.int32}  # torch.qint8 / quint8 / qint32


def requantize(value, dtype):
    lo, hi = _INT_RANGES[dtype]
    return torch.round(value).clamp(lo, hi).to(dtype)


_INT8, _QUINT4X2 = 1, 16  # c10::ScalarType numbers of torch.int8 and torch.quint4x2
INT4_RANGE = (-8, 7)


def packs_int4(dst, op, argument):
    """False for int8 (dst None, torch.int8), True for torch.quint4x2 (int4 packed in int32); other dtypes
    raise."""
    if dst is None or dst in (_INT8, torch.int8):
        return False
    check(
        dst in (_QUINT4X2, torch.quint4x2),
        op,
        f"{argument}={dst}: vnpu quantises to torch.int8 or torch.quint4x2 (int4 packed in int32)",
    )
    return True


def quantised(value, dst, op, argument):
    """float32 values already scaled -> int8 (round half to even, saturated), or int4 packed eight to an
    int32 (dst = torch.quint4x2; the last dim must be a multiple of 8)."""
    if not packs_int4(dst, op, argument):
        return requantize(value, torch.int8)
    check(
        value.shape[-1] % 8 == 0,
        op,
        f"The last dim input shape must be divisible by 8 if y dtype is torch.quint4x2, got {value.shape[-1]}",
    )
    return pack_int4(torch.round(value).clamp(*INT4_RANGE))


def _out_dtype(output_dtype, op):
    if output_dtype is None:
        return torch.int8
    return (
        _QUANT_DTYPES.get(output_dtype) if output_dtype in _QUANT_DTYPES else dtype_of(output_dtype, op, "output_dtype")
    )


_EXACT_K = 2**24 // (128 * 128) - 1  # int8 products summed over fewer terms stay below 2^24: exact in float32


def int_accumulate(a, b):
    """The exact product of int8 (or unpacked int4) matrices as int64, the card's int32 accumulator (before a
    bias is added to it): float32 matmuls over slices of at most _EXACT_K terms, each exact, summed as integers
    — fast BLAS instead of an integer matmul, and npu has no float64, as on the card."""
    k = a.shape[-1]
    total = None
    for start in range(0, max(k, 1), _EXACT_K):  # (an empty k still gives the zero product)
        terms = slice(start, start + _EXACT_K)
        part = torch.matmul(a[..., terms].float(), b[..., terms, :].float()).to(torch.int64)
        total = part if total is None else total + part
    return total


def int_matmul(a, b):
    """int_accumulate as float32 (one float32 matmul when it is exact)."""
    if a.shape[-1] <= _EXACT_K:
        return torch.matmul(a.float(), b.float())
    return int_accumulate(a, b).to(torch.float32)


def int8_operands(x1, x2, op):
    """The int8 matrices of an A8W8 matmul, or of an A4W4 one given as int32 holding eight int4 each."""
    check(x1.dtype == x2.dtype, op, f"x1 and x2 must have the same dtype, got {x1.dtype} and {x2.dtype}")
    check(
        x1.dtype in (torch.int8, torch.int32),
        op,
        f"x1 and x2 must be int8 (A8W8) or int32 holding int4 (A4W4), got {x1.dtype}",
    )
    if x1.dtype == torch.int32:
        return _unpack_along_memory(x1), _unpack_along_memory(x2)
    return x1, x2


def _packed_along_rows(packed):
    """int4 values are packed along the dimension that is contiguous in memory: the last one, or the one before
    it for a transposed view (a weight [n, k // 8] passed as .t())."""
    return packed.dim() >= 2 and packed.stride(-1) != 1 and packed.stride(-2) == 1


def _unpack_along_memory(packed):
    if _packed_along_rows(packed):
        return unpack_int4(packed.transpose(-1, -2)).transpose(-1, -2)
    return unpack_int4(packed)


def _quant_matmul(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None, output_dtype=None):
    op = "npu_quant_matmul"
    x1, x2 = int8_operands(x1, x2, op)
    check(x1.shape[-1] == x2.shape[-2], op, f"x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} do not chain")
    out_dtype = _out_dtype(output_dtype, op)
    acc = int_matmul(x1, x2)
    if bias is not None:
        acc = acc + bias.float()
    if out_dtype == torch.int32:
        return acc.to(torch.int32)
    if scale.dtype == torch.int64:  # npu_trans_quant_param's packed words: the FP19 scale and the offset
        from torch_npu.ops.quant_param import unpacked_quant_param

        scale, packed_offset = unpacked_quant_param(scale)
        offset = offset if offset is not None else packed_offset
    value = acc * scale.float()
    if pertoken_scale is not None:
        value = value * pertoken_scale.float().unsqueeze(-1)
    if offset is not None:
        value = value + offset.float()
    if out_dtype == torch.int8:
        return requantize(value, torch.int8)
    return value.to(out_dtype)


_SCALE_DTYPES_BY_OUTPUT = {  # op-plugin's table of supported combinations (Atlas A2 / A3)
    torch.int8: (torch.float32, torch.int64),
    torch.float16: (torch.float32, torch.int64),
    torch.bfloat16: (torch.float32, torch.bfloat16),
    torch.int32: (torch.float32, torch.bfloat16),
}


def _check_quant_matmul_dtypes(scale, offset, pertoken_scale, out_dtype, op):
    """The dtype combinations of scale, offset and pertoken_scale that the card's QuantBatchMatmul accepts for
    each output dtype; anything else is refused before computing."""
    check(
        scale.dtype in (torch.float32, torch.int64, torch.bfloat16),
        op,
        f"scale must be float32, int64 or bfloat16, got {scale.dtype}",
    )
    allowed = _SCALE_DTYPES_BY_OUTPUT.get(out_dtype, ())
    check(
        scale.dtype in allowed,
        op,
        f"a {scale.dtype} scale does not give {out_dtype} output (scale dtypes for it: "
        + ", ".join(str(d) for d in allowed)
        + ")",
    )
    if pertoken_scale is not None:
        check(
            out_dtype in (torch.float16, torch.bfloat16),
            op,
            f"pertoken_scale needs output_dtype float16 or bfloat16, got {out_dtype}",
        )
        check(pertoken_scale.dtype == torch.float32, op, f"pertoken_scale must be float32, got {pertoken_scale.dtype}")
        check(scale.dtype != torch.int64, op, "pertoken_scale needs a float32 or bfloat16 scale, got torch.int64")
    if offset is not None and scale.dim() < 2:
        check(out_dtype == torch.int8, op, f"offset needs int8 output, got {out_dtype}")


def npu_quant_matmul(
    x1,
    x2,
    scale,
    *,
    offset=None,
    pertoken_scale=None,
    bias=None,
    output_dtype=None,
    x1_dtype=None,
    x2_dtype=None,
    pertoken_scale_dtype=None,
    scale_dtype=None,
    group_sizes=None,
    y_scale=None,
):
    _check_quant_matmul_dtypes(
        scale, offset, pertoken_scale, _out_dtype(output_dtype, "npu_quant_matmul"), "npu_quant_matmul"
    )
    return _quant_matmul(
        x1, x2, scale, offset=offset, pertoken_scale=pertoken_scale, bias=bias, output_dtype=output_dtype
    )


npu_op(
    "npu_quant_matmul(Tensor x1, Tensor x2, Tensor scale, *, Tensor? offset=None, Tensor? pertoken_scale=None, "
    "Tensor? bias=None, int? output_dtype=None, int? x1_dtype=None, int? x2_dtype=None, "
    "int? pertoken_scale_dtype=None, int? scale_dtype=None, int[]? group_sizes=None, Tensor? y_scale=None) "
    "-> Tensor"
)(npu_quant_matmul)
npu_quant_matmul.__doc__ = """y = (x1 @ x2 + bias) * scale [* pertoken_scale per row] [+ offset], x1 [.., m, k] and
x2 [k, n] int8 (or int32 holding eight int4 each, lowest nibble first), bias int32; output int8 (default: requantised), int32 (no scaling), float16 or bfloat16."""


@npu_op(
    "npu_weight_quant_batchmatmul(Tensor x, Tensor weight, Tensor antiquant_scale, Tensor? antiquant_offset=None, "
    "Tensor? quant_scale=None, Tensor? quant_offset=None, Tensor? bias=None, int antiquant_group_size=0, "
    "int inner_precise=0, int? weight_dtype=None) -> Tensor"
)
def npu_weight_quant_batchmatmul(
    x,
    weight,
    antiquant_scale,
    antiquant_offset=None,
    quant_scale=None,
    quant_offset=None,
    bias=None,
    antiquant_group_size=0,
    inner_precise=0,
    weight_dtype=None,
):
    """y = x @ ((weight + antiquant_offset) * antiquant_scale) + bias in x's dtype (weight [k, n] int8, or
    int32 holding eight int4 each along its contiguous dimension: [k, n // 8], or [n, k // 8] passed as .t();
    scales per tensor, per channel [n] or, with antiquant_group_size g, per group [ceil(k/g), n]);
    with quant_scale the result is requantised to int8: y * quant_scale + quant_offset."""
    op = "npu_weight_quant_batchmatmul"
    if weight.dtype == torch.int32:
        weight = _unpack_along_memory(weight)
    check(x.shape[-1] == weight.shape[0], op, f"x {tuple(x.shape)} and weight {tuple(weight.shape)} do not chain")
    w = weight.to(x.dtype)
    scale, offset = antiquant_scale, antiquant_offset
    if antiquant_group_size > 0:
        check(scale.dim() == 2, op, "a group-wise antiquant_scale must be [ceil(k / group), n]")
        scale = scale.repeat_interleave(antiquant_group_size, dim=0)[: weight.shape[0]]
        offset = None if offset is None else offset.repeat_interleave(antiquant_group_size, dim=0)[: weight.shape[0]]
    if offset is not None:
        w = w + offset.to(x.dtype)
    y = torch.matmul(x, w * scale.to(x.dtype))
    if bias is not None:
        y = y + bias.to(y.dtype)
    if quant_scale is not None:
        q = y.float() * quant_scale.float()
        return requantize(q + (quant_offset.float() if quant_offset is not None else 0.0), torch.int8)
    return y


@npu_op(
    "npu_quantize(Tensor self, Tensor scales, Tensor? zero_points, int dtype, int axis=1, bool div_mode=True) "
    "-> Tensor",
    dtypes={"self": FLOATS, "scales": FLOATS},
    api="aclnnQuantize",
)
def npu_quantize(x, scales, zero_points, dtype, axis=1, div_mode=True):
    """round(x / scales + zero_points) (div_mode) or round(x * scales + zero_points), scales broadcast
    along `axis`, saturated to dtype (torch.qint8 / quint8 / qint32, or int8 / uint8 / int32); torch.quint4x2
    saturates to int4 and packs eight values into each int32 along the last dim."""
    op = "npu_quantize"
    int4 = dtype in (_QUINT4X2, torch.quint4x2)
    if int4:
        check(x.shape[-1] % 8 == 0, op, "If dtype is quint4x2, last dim must be divided by 8")
    else:
        target = _QUANT_DTYPES.get(dtype) if dtype in _QUANT_DTYPES else dtype_of(dtype, op)
        check(target in _INT_RANGES, op, f"dtype must be an 8- or 32-bit integer type, got {target}")
    axis = axis % x.dim()
    shape = [1] * x.dim()
    if scales.numel() > 1:
        shape[axis] = scales.numel()
    s = scales.float().reshape(shape)
    value = x.float() / s if div_mode else x.float() * s
    if zero_points is not None:
        value = value + zero_points.float().reshape(shape)
    if int4:
        return pack_int4(torch.round(value).clamp(*INT4_RANGE))
    return requantize(value, target)


def unpack_int4(packed):
    """int32 [..., k] holding eight signed 4-bit values each (lowest nibble first) -> int8 [..., 8k]."""
    shifts = torch.arange(0, 32, 4, device=packed.device, dtype=torch.int64)
    nibbles = (packed.to(torch.int64).unsqueeze(-1) >> shifts) & 0xF
    signed = torch.where(nibbles >= 8, nibbles - 16, nibbles)
    return signed.reshape(*packed.shape[:-1], packed.shape[-1] * 8).to(torch.int8)


@npu_op(
    "npu_anti_quant(Tensor x, Tensor scale, *, Tensor? offset=None, int? dst_dtype=None, int? src_dtype=None) "
    "-> Tensor"
)
def npu_anti_quant(x, scale, *, offset=None, dst_dtype=None, src_dtype=None):
    """(x + offset) * scale in dst_dtype (float16 by default); scale/offset broadcast over the last dim. An
    int32 x holds eight packed int4 values per element (the lowest nibble first), so [..., k] reads as
    [..., 8k] int4."""
    if isinstance(dst_dtype, int):  # a number outside c10's ScalarType enum prints as UNKNOWN_SCALAR there
        check(
            0 <= dst_dtype < _SCALAR_TYPE_COUNT,
            "npu_anti_quant",
            "Input dst_type must be valid, but got UNKNOWN_SCALAR",
        )
    out_dtype = torch.float16 if dst_dtype is None else dtype_of(dst_dtype, "npu_anti_quant", "dst_dtype")
    value = unpack_int4(x).float() if x.dtype == torch.int32 else x.float()
    if offset is not None:
        value = value + offset.float()
    return (value * scale.float()).to(out_dtype)


@npu_op(
    "npu_convert_weight_to_int4pack(Tensor weight, int inner_k_tiles=0) -> Tensor",
    dtypes={"weight": (torch.int32,)},
    api="aclnnConvertWeightToINT4Pack",
)
def npu_convert_weight_to_int4pack(weight, inner_k_tiles=0):
    """int32 weights holding int4 values [k, n] -> int32 [k, n / 8]: eight 4-bit values per int32, the
    first in the lowest nibble."""
    op = "npu_convert_weight_to_int4pack"
    check(weight.dtype == torch.int32 and weight.dim() == 2, op, f"weight must be 2-D int32, got {weight.dtype}")
    check(weight.shape[-1] % 8 == 0, op, f"weight's last dim ({weight.shape[-1]}) must be a multiple of 8")
    return pack_int4(weight)


def pack_int4(values):
    """Integers in int4's range [..., 8k] -> int32 [..., k]: eight 4-bit values per int32, the first in the
    lowest nibble (the inverse of unpack_int4)."""
    nibbles = (values.to(torch.int64) & 0xF).reshape(*values.shape[:-1], -1, 8)
    shifts = torch.arange(0, 32, 4, device=values.device, dtype=torch.int64)
    packed = (nibbles << shifts).sum(-1)
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)


def group_row_counts(group_list, group_list_type, total, op):
    """Rows of each group, from a group_list tensor or (npu_grouped_matmul.List) a list of ints."""
    sizes = group_list.tolist() if isinstance(group_list, torch.Tensor) else list(group_list)
    if group_list_type == 0:
        sizes = [b - a for a, b in zip([0] + sizes[:-1], sizes)]
    elif group_list_type == 2:
        sizes = [int(s[1]) for s in sizes]
    check(group_list_type in (0, 1, 2), op, f"group_list_type must be 0, 1 or 2, got {group_list_type}")
    check(sum(sizes) <= total, op, f"group_list covers {sum(sizes)} rows but x has {total}")
    return sizes


_GROUPED_ACTIVATIONS = {
    0: None,
    1: torch.relu,
    2: lambda y: torch.nn.functional.gelu(y, approximate="tanh"),
    4: lambda y: torch.ops.npu.npu_fast_gelu(y),
    5: torch.nn.functional.silu,
}


def _nth(tensors, i):
    return None if not tensors else tensors[i if len(tensors) > 1 else 0]


def _dequantised_weight(w, scale, offset, dtype, op, i):
    """antiquant: (w + offset) * scale in x's dtype; scale per channel [n] or per group [groups, n]."""
    k = w.shape[-2]
    if scale.dim() == 2 and scale.shape[0] > 1:
        check(k % scale.shape[0] == 0, op, f"antiquant_scale[{i}] has {scale.shape[0]} groups for k={k}")
        group = k // scale.shape[0]
        scale = scale.repeat_interleave(group, 0)
        offset = None if offset is None else offset.repeat_interleave(group, 0)
    value = w.to(dtype) if offset is None else w.to(dtype) + offset.to(dtype)
    return value * scale.to(dtype)


def _holds_int4(w, antiquant_scale):
    """A grouped-matmul weight of W4A16 (antiquant with int32 weights): eight int4 values to an int32."""
    return bool(antiquant_scale) and w.dtype == torch.int32


def _unpacked_weight_width(w, antiquant_scale):
    """Output channels of a grouped-matmul weight (int4 ones are packed along their memory)."""
    if not _holds_int4(w, antiquant_scale) or _packed_along_rows(w):
        return w.shape[-1]
    return w.shape[-1] * 8


def _group_product(
    xi, wi, i, *, bias, scale, offset, antiquant_scale, antiquant_offset, per_token_scale, output_dtype, op
):
    if _holds_int4(wi, antiquant_scale):
        wi = _unpack_along_memory(wi)
    check(xi.shape[-1] == wi.shape[-2], op, f"x[{i}] {tuple(xi.shape)} and weight[{i}] {tuple(wi.shape)} do not chain")
    b = _nth(bias, i)
    if scale:
        check(
            xi.dtype == torch.int8 and wi.dtype == torch.int8,
            op,
            f"with scale (quantised), x and weight must be int8, got {xi.dtype} and {wi.dtype}",
        )
        return _quant_matmul(
            xi,
            wi,
            _nth(scale, i),
            offset=_nth(offset, i),
            pertoken_scale=per_token_scale,
            bias=b,
            output_dtype=output_dtype,
        )
    if antiquant_scale:
        wi = _dequantised_weight(wi, _nth(antiquant_scale, i), _nth(antiquant_offset, i), xi.dtype, op, i)
    yi = xi @ wi
    return yi if b is None else yi + b.to(yi.dtype)


def _grouped_matmul(
    x,
    weight,
    *,
    bias=None,
    scale=None,
    offset=None,
    antiquant_scale=None,
    antiquant_offset=None,
    per_token_scale=None,
    group_list=None,
    activation_input=None,
    activation_quant_scale=None,
    activation_quant_offset=None,
    split_item=0,
    group_type=None,
    group_list_type=0,
    act_type=0,
    tuning_config=None,
    output_dtype=None,
    x_dtype=None,
    weight_dtype=None,
    scale_dtype=None,
    per_token_scale_dtype=None,
):
    """y_i = act(x_i @ w_i + b_i) per group. Quantised (scale): int8 x and weight, y_i = (x_i @ w_i + b_i) *
    scale_i [* per_token_scale per row] [+ offset_i], output int8 (requantised) unless output_dtype says
    float16 / bfloat16 / int32, as npu_quant_matmul. Weight antiquant (antiquant_scale): w_i = (w_i +
    antiquant_offset_i) * antiquant_scale_i in x's dtype, per channel [n] or per group [groups, n]; int8
    weights (W8A16) or int32 ones holding eight int4 values each along their memory (W4A16: [k, n / 8]).
    act_type: 0 none, 1 relu, 2 gelu (tanh), 4 fast gelu, 5 silu (3, gelu with erf, torch_npu refuses too).
    Forms: one x per weight, or one x split along M by group_list (group_type 0); split_item 2/3 return
    one concatenated tensor."""
    op = "npu_grouped_matmul"
    check(
        group_type in (None, -1, 0),
        op,
        f"group_type={group_type}: only -1 (no grouping) and 0 (split M) are " "implemented",
    )
    check(
        act_type in _GROUPED_ACTIVATIONS, op, f"act_type must be one of {sorted(_GROUPED_ACTIVATIONS)}, got {act_type}"
    )
    check(
        not (scale and antiquant_scale),
        op,
        "scale (quantised) and antiquant_scale (weight antiquant) exclude " "each other",
    )
    if group_list is not None and len(x) == 1 and len(weight) > 1:
        sizes = group_row_counts(group_list, group_list_type, x[0].shape[0], op)
        check(len(sizes) == len(weight), op, f"group_list has {len(sizes)} groups for {len(weight)} weights")
        xs = list(x[0][: sum(sizes)].split(sizes, 0))
        token_scales = list(per_token_scale[0][: sum(sizes)].split(sizes, 0)) if per_token_scale else None
    else:
        xs = list(x)
        token_scales = list(per_token_scale) if per_token_scale else None
    check(len(xs) == len(weight), op, f"{len(xs)} inputs for {len(weight)} weights")
    activation = _GROUPED_ACTIVATIONS[act_type]
    outs = []
    for i, (xi, wi) in enumerate(zip(xs, weight)):
        yi = _group_product(
            xi,
            wi,
            i,
            bias=bias,
            scale=scale,
            offset=offset,
            antiquant_scale=antiquant_scale,
            antiquant_offset=antiquant_offset,
            per_token_scale=_nth(token_scales, i),
            output_dtype=output_dtype,
            op=op,
        )
        outs.append(yi if activation is None else activation(yi))
    if split_item in (2, 3):
        out = torch.cat(outs, 0)
        rows = sum(t.shape[0] for t in x)
        if out.shape[0] < rows:  # rows beyond group_list's coverage are not computed: zeros
            out = torch.cat([out, out.new_zeros(rows - out.shape[0], out.shape[1])], 0)
        return [out]
    return outs


def grouped_matmul_fake(
    x, weight, *, group_list=None, split_item=0, scale=None, output_dtype=None, group_list_type=0,
    antiquant_scale=None, **kwargs
):  # fmt: skip
    op = "npu_grouped_matmul"
    dtype = _out_dtype(output_dtype, op) if scale else x[0].dtype
    if group_list is not None and len(x) == 1 and len(weight) > 1:
        if split_item in (2, 3):
            return [x[0].new_empty(x[0].shape[0], _unpacked_weight_width(weight[0], antiquant_scale), dtype=dtype)]
        # One output per group: its rows are group_list's values, known only when they are a list of ints.
        check(
            not isinstance(group_list, torch.Tensor),
            op,
            "with group_list and split_item 0/1 the output sizes depend "
            "on group_list's values (not traceable); use split_item=3",
        )
        sizes = group_row_counts(group_list, group_list_type, x[0].shape[0], op)
        return [
            x[0].new_empty(n, _unpacked_weight_width(wi, antiquant_scale), dtype=dtype) for n, wi in zip(sizes, weight)
        ]
    outs = [
        xi.new_empty(*xi.shape[:-1], _unpacked_weight_width(wi, antiquant_scale), dtype=dtype)
        for xi, wi in zip(x, weight)
    ]
    if split_item in (2, 3):
        return [torch.cat(outs, 0)]
    return outs


npu_op(
    "npu_grouped_matmul(Tensor[] x, Tensor[] weight, *, Tensor[]? bias=None, Tensor[]? scale=None, "
    "Tensor[]? offset=None, Tensor[]? antiquant_scale=None, Tensor[]? antiquant_offset=None, "
    "Tensor[]? per_token_scale=None, Tensor? group_list=None, Tensor[]? activation_input=None, "
    "Tensor[]? activation_quant_scale=None, Tensor[]? activation_quant_offset=None, int? split_item=0, "
    "int? group_type=None, int? group_list_type=0, int? act_type=0, int[]? tuning_config=None, "
    "int? output_dtype=None, int? x_dtype=None, int? weight_dtype=None, int? scale_dtype=None, "
    "int? per_token_scale_dtype=None) -> Tensor[]",
    fake=grouped_matmul_fake,
)(_grouped_matmul)
