"""npu_dynamic_mx_quant / npu_anti_mx_quant: MX quantisation (OCP Microscaling): every block_size values along `axis` share a
power-of-two scale, and each value divided by it is cast to an 8- or 4-bit float.

    shared_exp = floor(log2(max |block|)) - emax(dst_type)      (clamped to [-127, 127]; an all-zero block: -127)
    y = cast(x / 2^shared_exp), saturated to dst_type's largest magnitude
    mxscale = shared_exp + 127, float8_e8m0fnu returned as uint8

dst_type: torch.float8_e5m2 (291, emax 15), torch.float8_e4m3fn (292, emax 8), float4_e2m1fn_x2 (296, the
default, emax 2) and float4_e1m2fn_x2 (297, emax 0); FP4 results are two values per uint8 along the last dim,
the first in the low nibble. round_mode "rint" (half to even; the only one for FP8), "round" (half away from
zero) or "floor" for FP4. mxscale has input's shape with the axis replaced by (groups rounded up to even) / 2
and a trailing 2: the scales of groups 2i and 2i+1 side by side (padding groups are 0).
scale_alg 0 (the OCP rule); for FP8, 1 (the cuBLAS rule: the smallest power of two >= max |block| / the
format's largest value); for float4_e2m1, 2 (the dynamic dtype range rule: the same with dst_type_max, 6.0 when 0,
as the largest value and a scale of 2^-127 when max |block| / dst_type_max is below float32's normal range).
dst_type_max applies to scale_alg 2 only (0, or 6.0 to 12.0; block_size 32); max_low_bound is refused.
npu_anti_mx_quant decodes: each value (FP8, or FP4 codes in uint8 pairs) times 2^(mxscale - 127) of its block of
32 along `axis`, as dst_type (bfloat16 by default, float16 or float32).
"""

import math

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = ["mx_quantised"]

_OP = "npu_dynamic_mx_quant"
# dst_type -> (torch dtype or FP4 grid name, emax)
_DST = {
    291: (torch.float8_e5m2, 15),
    23: (torch.float8_e5m2, 15),
    292: (torch.float8_e4m3fn, 8),
    24: (torch.float8_e4m3fn, 8),
    296: ("e2m1", 2),
    297: ("e1m2", 0),
}
_FP4_GRIDS = {  # the non-negative values of each FP4 format, by code 0..7
    "e2m1": (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0),
    "e1m2": (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75),
}


def mx_destination(dst_type, round_mode, scale_alg, dst_type_max, max_low_bound, op=_OP):
    check(int(dst_type) in _DST, op, f"dst_type must be 291, 292, 296 or 297 (float8_e5m2, float8_e4m3fn, "
          f"float4_e2m1fn_x2, float4_e1m2fn_x2), got {int(dst_type)}")  # fmt: skip
    dst, emax = _DST[int(dst_type)]
    modes = ("rint", "round", "floor") if isinstance(dst, str) else ("rint",)
    check(
        round_mode in modes, op, f"round_mode {round_mode!r} is not supported with this dst_type ({', '.join(modes)})"
    )
    fp8 = not isinstance(dst, str)
    check(scale_alg in (0, None) or (scale_alg == 1 and fp8) or (scale_alg == 2 and dst == "e2m1"), op,
          f"scale_alg={scale_alg} is not supported with this dst_type (0, the OCP rule, for every dst_type; "
          "1, cuBLAS's, for FP8 outputs; 2, the dynamic dtype range, for float4_e2m1 outputs)")  # fmt: skip
    check(not dst_type_max or (scale_alg == 2 and 6.0 <= dst_type_max <= 12.0), op,
          f"dst_type_max must be 0.0, or 6.0 to 12.0 with scale_alg=2, got {dst_type_max}")  # fmt: skip
    check(not max_low_bound, op, "max_low_bound is not computed by vnpu")
    return dst, emax


def block_exponents(amax, dst, emax, scale_alg, dst_type_max):
    """Each block's scale exponent by scale_alg (see the module doc)."""
    if scale_alg == 1:
        return ceil_exponents(amax / torch.finfo(dst).max)
    if scale_alg == 2:
        ratio = amax / (dst_type_max or _FP4_GRIDS["e2m1"][-1])
        normal = ratio >= torch.finfo(torch.float32).tiny
        return torch.where(normal, ceil_exponents(ratio), torch.full_like(ratio, -127.0))
    return shared_exponents(amax, emax)


def _fp4_codes(values, grid_name, round_mode):
    """Sign-magnitude 4-bit codes of values already within the format's range."""
    grid = torch.tensor(_FP4_GRIDS[grid_name], dtype=torch.float32, device=values.device)
    magnitude = values.abs().clamp(max=float(grid[-1]))
    below = torch.bucketize(magnitude, grid, right=True) - 1  # the largest grid value <= magnitude
    above = (below + 1).clamp(max=len(grid) - 1)
    low, high = grid[below], grid[above]
    if round_mode == "floor":  # toward -inf: negative values go up in magnitude
        take_high = (magnitude > low) & (values < 0)
    else:
        middle = (low + high) / 2
        tie = magnitude == middle
        prefer_high = (above % 2 == 0) if round_mode == "rint" else torch.ones_like(tie)
        take_high = (magnitude > middle) | (tie & prefer_high)
    code = torch.where(take_high, above, below)
    return torch.where((values < 0) & (code > 0), code | 8, code)


def mx_scale_layout(scales, axis):
    """[.., G, ..] scales along `axis` -> [.., ceil(G/2), .., 2]: groups 2i and 2i+1 side by side."""
    scales = scales.movedim(axis, -1)
    if scales.shape[-1] % 2:
        scales = torch.cat([scales, scales.new_zeros(*scales.shape[:-1], 1)], -1)
    pairs = scales.reshape(*scales.shape[:-1], scales.shape[-1] // 2, 2)
    return pairs.movedim(-2, axis if axis >= 0 else axis - 1)


def mx_quantised(x, axis, round_mode, dst_type, block_size, scale_alg=0, dst_type_max=0.0, max_low_bound=0.0, op=_OP):
    """(y, mxscale) of x, MX-quantised along axis in blocks of block_size (see the module doc)."""
    dst, emax = mx_destination(dst_type, round_mode, scale_alg, dst_type_max, max_low_bound, op)
    check(x.dtype in (torch.float16, torch.bfloat16, torch.float32), op, f"input must be float16, bfloat16 or float32, got {x.dtype}")  # fmt: skip
    check(1 <= x.dim() <= 7, op, f"input must have 1 to 7 dims, got {x.dim()}")
    check(-x.dim() <= axis < x.dim(), op, f"axis must be in [{-x.dim()}, {x.dim() - 1}], got {axis}")
    check(block_size > 0 and block_size % 32 == 0 and block_size <= 1024, op,
          f"block_size must be a multiple of 32 in [32, 1024], got {block_size}")  # fmt: skip
    check(scale_alg != 2 or block_size == 32, op, f"block_size must be 32 with scale_alg=2, got {block_size}")
    axis = axis % x.dim()
    length = x.shape[axis]
    groups = math.ceil(length / block_size)
    moved = x.float().movedim(axis, -1)
    padded = torch.nn.functional.pad(moved, (0, groups * block_size - length))
    blocks = padded.reshape(*moved.shape[:-1], groups, block_size)
    amax = blocks.abs().amax(-1)
    exponent = block_exponents(amax, dst, emax, scale_alg, dst_type_max)
    scaled = (blocks / torch.exp2(exponent)[..., None]).reshape(*moved.shape[:-1], -1)[..., :length]
    scaled = scaled.movedim(-1, axis)
    scale_bytes = (exponent + 127).to(torch.uint8).movedim(-1, axis)
    return mx_encoded(scaled, dst, round_mode, op), mx_scale_layout(scale_bytes, axis)


def shared_exponents(amax, emax):
    """The OCP rule: floor(log2(block max |value|)) - emax, clamped to e8m0's range (-127 for an all-zero block)."""
    exponent = torch.where(amax > 0, torch.floor(torch.log2(amax)) - emax, torch.full_like(amax, -127.0))
    return exponent.clamp(-127, 127)


def ceil_exponents(ratio):
    """The exponent of the smallest power of two >= ratio (exact, from the float32 mantissa), clamped to e8m0's range;
    -127 for 0. Applied to max |block| / dst's largest value it is cuBLAS's scale rule."""
    mantissa, exponent = torch.frexp(ratio)  # ratio = mantissa * 2^exponent, mantissa in [0.5, 1)
    exponent = torch.where(mantissa == 0.5, exponent - 1, exponent).float()
    return torch.where(ratio > 0, exponent, torch.full_like(ratio, -127.0)).clamp(-127, 127)


def mx_encoded(scaled, dst, round_mode, op=_OP):
    """Values already divided by their block scale -> float8 (saturated), or FP4 codes packed two per uint8 along
    the last dim."""
    if isinstance(dst, str):
        check(scaled.shape[-1] % 2 == 0, op, f"input's last dim must be even for FP4 outputs, got {scaled.shape[-1]}")
        codes = _fp4_codes(scaled.contiguous(), dst, round_mode)
        pairs = codes.reshape(*codes.shape[:-1], -1, 2)
        return (pairs[..., 0] | (pairs[..., 1] << 4)).to(torch.uint8)
    limit = torch.finfo(dst).max
    return scaled.clamp(-limit, limit).to(dst)


def is_mx_type(dst_type):
    """Whether dst_type names one of the MX destination formats (float8 or float4)."""
    return dst_type is not None and int(dst_type) in _DST


def mx_outputs_fake(input, *, axis=-1, round_mode="rint", dst_type=296, block_size=32, scale_alg=0, dst_type_max=0.0,
          max_low_bound=0.0):  # fmt: skip
    dst, _ = mx_destination(dst_type, round_mode, scale_alg, dst_type_max, max_low_bound)
    axis = axis % input.dim()
    groups = math.ceil(input.shape[axis] / block_size)
    scale_shape = list(input.shape)
    scale_shape[axis] = (groups + 1) // 2
    if isinstance(dst, str):
        y = input.new_empty(*input.shape[:-1], input.shape[-1] // 2, dtype=torch.uint8)
    else:
        y = input.new_empty(input.shape, dtype=dst)
    return y, input.new_empty(*scale_shape, 2, dtype=torch.uint8)


@npu_op(
    'npu_dynamic_mx_quant(Tensor input, *, int axis=-1, str round_mode="rint", int dst_type=296, int block_size=32, '
    "int? scale_alg=0, float dst_type_max=0.0, float max_low_bound=0.0) -> (Tensor, Tensor)",
    fake=mx_outputs_fake,
)
def npu_dynamic_mx_quant(input, *, axis=-1, round_mode="rint", dst_type=296, block_size=32, scale_alg=0,
                         dst_type_max=0.0, max_low_bound=0.0):  # fmt: skip
    """(y, mxscale): MX-quantised values and their shared power-of-two scales (e8m0 bytes)."""
    return mx_quantised(input, axis, round_mode, dst_type, block_size, scale_alg, dst_type_max, max_low_bound)


_ANTI_DST = {15: torch.bfloat16, 5: torch.float16, 6: torch.float32}


def fp4_values(packed, grid_name):
    grid = torch.tensor(_FP4_GRIDS[grid_name], dtype=torch.float32, device=packed.device)
    codes = torch.stack([packed & 0xF, packed >> 4], -1).reshape(*packed.shape[:-1], -1).long()
    magnitude = grid[codes & 7]
    return torch.where(codes & 8 > 0, -magnitude, magnitude)


def _anti_fake(x, mxscale, *, axis=-1, dst_type=15, src_type=292):
    shape = list(x.shape)
    if int(src_type) in (296, 297):
        shape[-1] *= 2
    return x.new_empty(shape, dtype=_ANTI_DST.get(int(dst_type), torch.bfloat16))


@npu_op(
    "npu_anti_mx_quant(Tensor x, Tensor mxscale, *, int? axis=-1, int? dst_type=15, int? src_type=292) -> Tensor",
    fake=_anti_fake,
)
def npu_anti_mx_quant(x, mxscale, *, axis=-1, dst_type=15, src_type=292):
    """MX-quantised values back to dst_type, with their e8m0 block scales."""
    op = "npu_anti_mx_quant"
    check(int(dst_type) in _ANTI_DST, op, f"dst_type must be 15 (bfloat16), 5 (float16) or 6 (float32), got {dst_type}")
    check(int(src_type) in _DST, op, f"src_type must be 291, 292, 296 or 297, got {src_type}")
    source, _ = _DST[int(src_type)]
    if isinstance(source, str):
        check(x.dtype == torch.uint8, op, f"FP4 inputs are uint8 code pairs, got {x.dtype}")
        values = fp4_values(x, source)
    else:
        check(x.dtype == source, op, f"x must be {source} for src_type {src_type}, got {x.dtype}")
        values = x.float()
    axis = (axis if axis is not None else -1) % values.dim()
    check(mxscale.dim() == values.dim() + 1 and mxscale.shape[-1] == 2, op,
          f"mxscale must have rank {values.dim() + 1} with a last dim of 2, got {tuple(mxscale.shape)}")  # fmt: skip
    scales = mxscale.movedim(axis, -2).reshape(*mxscale.movedim(axis, -2).shape[:-2], -1)  # [.., groups] along axis
    exponent = scales.float() - 127
    moved = values.movedim(axis, -1)
    length = moved.shape[-1]
    check(scales.shape[-1] * 32 >= length, op, f"mxscale holds {scales.shape[-1]} blocks, too few for {length} values")
    factor = torch.exp2(exponent).repeat_interleave(32, dim=-1)[..., :length]
    return (moved * factor).movedim(-1, axis).to(_ANTI_DST[int(dst_type)])
