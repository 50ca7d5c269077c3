"""npu_swiglu_group_quant / npu_swiglu_group_quant_backward: SwiGLU of the two halves of x's last dim, weighted per
token, then quantised (SwigluGroupQuant, MoE expert FFNs), and its gradient.

Forward, rows past real_bs = sum(group_index) (counts) left zero:
    x0, x1 = halves of x [.., D]; with clamp_limit c > 0: x0 = min(x0, c), x1 = clamp(x1, -c, c)
    y = silu(x0) * x1 * weight[token]                     (float32; y_origin = y in x's dtype when output_origin)
quant_mode 0: blocks of 128 (block_size 0 or 128): amax (NaN / Inf ignored) floored at 1e-4, scale = amax / FP8 max
    (rounded up to a power of two with round_scale), y * (FP8 max / amax) cast to FP8; scale float32 [.., ceil(H / 128)].
quant_mode 1: MX blocks of 32: e = ceil(log2(max(amax, 1e-4) / max of dst)), y * 2^-e cast (FP8 or packed FP4);
    scale e8m0 [.., ceil(H / 64), 2]. round_scale must be True.
quant_mode 2: static HiFloat8: y * scale[group] (scale given, [1] or [G]); y_scale echoes it.
quant_mode 3: dynamic HiFloat8 per group (whole tensor without group_index): s = max(amax, eps) / dst_type_max,
    y / s as HiFloat8 codes; y_scale [1] or [G].
The backward returns (grad_x [.., D], grad_weight [tokens]) with the clamps' pass-through masks.
"""

import math

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check
from torch_npu.ops.mx_quant import mx_encoded, mx_scale_layout
from torch_npu.ops.registration import npu_op
from torch_npu.utils import hifloat8

__all__ = []

_OP = "npu_swiglu_group_quant"
_FP8 = {23: torch.float8_e5m2, 291: torch.float8_e5m2, 24: torch.float8_e4m3fn, 292: torch.float8_e4m3fn}
_FP4 = {296: ("e2m1", 6.0), 297: ("e1m2", 1.75)}
_FLOOR = 1e-4
_HIF8_EPS = 1e-8


def _real_rows(group_index, rows):
    if group_index is None:
        return rows
    check(bool((group_index >= 0).all()), _OP, "group_index must hold non-negative token counts")
    return min(int(group_index.sum()), rows)


def _halves(x, clamp_limit):
    x0, x1 = x.float().chunk(2, -1)
    if clamp_limit > 0:
        x0, x1 = x0.clamp(max=clamp_limit), x1.clamp(-clamp_limit, clamp_limit)
    return x0, x1


def _activated(x, weight, group_index, clamp_limit):
    check(x.shape[-1] % 2 == 0, _OP, f"x's last dim must be even, got {x.shape[-1]}")
    x0, x1 = _halves(x, clamp_limit)
    y = (F.silu(x0) * x1).reshape(-1, x0.shape[-1])
    if weight is not None:
        check(weight.numel() == y.shape[0], _OP, f"weight must hold one value per token ({y.shape[0]}), got {weight.numel()}")  # fmt: skip
        y = y * weight.float().reshape(-1, 1)
    real = _real_rows(group_index, y.shape[0])
    return torch.cat([y[:real], y.new_zeros(y.shape[0] - real, y.shape[1])]), real


def _finite_amax(blocks):
    return torch.where(torch.isfinite(blocks), blocks.abs(), torch.zeros_like(blocks)).amax(-1)


def _ceil_power_exponent(value):
    """ceil(log2(value)) of positive float32 values, exactly (from the mantissa)."""
    mantissa, exponent = torch.frexp(value)
    return torch.where(mantissa == 0.5, exponent - 1, exponent).float()


def _block_fp8(y, dst, round_scale, block):
    top = torch.finfo(dst).max
    groups = math.ceil(y.shape[1] / block)
    blocks = F.pad(y, (0, groups * block - y.shape[1])).reshape(y.shape[0], groups, block)
    amax = _finite_amax(blocks).clamp(min=_FLOOR)
    if round_scale:
        exponent = _ceil_power_exponent(amax / top)
        scale, inverse = torch.exp2(exponent), torch.exp2(-exponent)
    else:
        scale, inverse = amax / top, top / amax
    scaled = blocks * inverse[..., None]
    scaled = torch.where(torch.isfinite(scaled), scaled, blocks).reshape(y.shape[0], -1)[:, : y.shape[1]]
    return scaled.clamp(-top, top).to(dst), scale


def _mx(y, dst_type, block):
    grid, top = _FP4.get(dst_type, (None, None))
    dst = grid if grid is not None else _FP8[dst_type]
    top = top if grid is not None else torch.finfo(dst).max
    groups = math.ceil(y.shape[1] / block)
    blocks = F.pad(y, (0, groups * block - y.shape[1])).reshape(y.shape[0], groups, block)
    exponent = _ceil_power_exponent(blocks.abs().amax(-1).clamp(min=_FLOOR) / top).clamp(-127, 127)
    scaled = (blocks * torch.exp2(-exponent)[..., None]).reshape(y.shape[0], -1)[:, : y.shape[1]]
    return mx_encoded(scaled, dst, "rint", _OP), mx_scale_layout((exponent + 127).to(torch.uint8), -1)


def _group_bounds(group_index, rows):
    if group_index is None:
        return [(0, rows)]
    ends = torch.cumsum(group_index.long(), 0).clamp(max=rows).tolist()
    return list(zip([0, *ends[:-1]], ends))


def _hif8_static(y, scale, group_index):
    bounds = _group_bounds(group_index, y.shape[0])
    check(scale is not None and scale.numel() == len(bounds), _OP,
          f"quant_mode 2 needs scale with one value per group ({len(bounds)})")  # fmt: skip
    factors = torch.ones(y.shape[0], 1, device=y.device)
    for g, (start, end) in enumerate(bounds):
        factors[start:end] = scale.reshape(-1)[g].float()
    return hifloat8.encode(y * factors), scale.float().reshape(-1).clone()


def _hif8_dynamic(y, group_index, dst_type_max):
    bounds = _group_bounds(group_index, y.shape[0])
    codes = torch.zeros_like(y, dtype=torch.uint8)
    scales = torch.zeros(len(bounds), device=y.device)
    for g, (start, end) in enumerate(bounds):
        part = y[start:end]
        amax = part.abs().amax() if part.numel() else part.new_zeros(())
        scales[g] = amax.clamp(min=_HIF8_EPS) / dst_type_max
        codes[start:end] = hifloat8.encode(part / scales[g])
    return codes, scales


def _check_mode(x, dst_type, quant_mode, block_size, round_scale):
    check(quant_mode in (0, 1, 2, 3), _OP, f"quant_mode must be 0, 1, 2 or 3, got {quant_mode}")
    if quant_mode == 0:
        check(int(dst_type) in _FP8, _OP, f"quant_mode 0 quantises to FP8 (dst_type 291 / 292), got {dst_type}")
        check(block_size in (0, 128), _OP, f"quant_mode 0 takes block_size 0 or 128, got {block_size}")
    if quant_mode == 1:
        check(int(dst_type) in _FP8 or int(dst_type) in _FP4, _OP, f"quant_mode 1 quantises to FP8 or FP4, got {dst_type}")  # fmt: skip
        check(block_size in (0, 32), _OP, f"quant_mode 1 takes block_size 0 or 32, got {block_size}")
        check(round_scale, _OP, "quant_mode 1 needs round_scale=True")


def _fake(x, *, weight=None, group_index=None, scale=None, dst_type=291, quant_mode=0, block_size=0,
          round_scale=False, clamp_limit=-1.0, dst_type_max=15.0, output_origin=False):  # fmt: skip
    _check_mode(x, dst_type, quant_mode, block_size, round_scale)
    half = x.shape[-1] // 2
    lead = x.shape[:-1]
    origin = x.new_empty(*lead, half) if output_origin else x.new_empty(0)
    if quant_mode == 0:
        return x.new_empty(*lead, half, dtype=_FP8[int(dst_type)]), x.new_empty(*lead, math.ceil(half / 128)), origin
    if quant_mode == 1:
        packed = int(dst_type) in _FP4
        y = x.new_empty(*lead, half // 2 if packed else half, dtype=torch.uint8 if packed else _FP8[int(dst_type)])
        return y, x.new_empty(*lead, math.ceil(half / 64), 2, dtype=torch.uint8), origin
    groups = 1 if group_index is None else group_index.shape[0]
    return x.new_empty(*lead, half, dtype=torch.uint8), x.new_empty(groups), origin


@npu_op(
    "npu_swiglu_group_quant(Tensor x, *, Tensor? weight=None, Tensor? group_index=None, Tensor? scale=None, "
    "int dst_type=291, int quant_mode=0, int block_size=0, bool round_scale=False, float clamp_limit=-1.0, "
    "float dst_type_max=15.0, bool output_origin=False) -> (Tensor, Tensor, Tensor)",
    fake=_fake,
)
def npu_swiglu_group_quant(x, *, weight=None, group_index=None, scale=None, dst_type=291, quant_mode=0, block_size=0,
                           round_scale=False, clamp_limit=-1.0, dst_type_max=15.0, output_origin=False):  # fmt: skip
    """(y, y_scale, y_origin)."""
    _check_mode(x, dst_type, quant_mode, block_size, round_scale)
    check(x.dtype in (torch.float32, torch.float16, torch.bfloat16), _OP, f"x must be float32, float16 or bfloat16, got {x.dtype}")  # fmt: skip
    y, _ = _activated(x, weight, group_index, clamp_limit)
    lead, half = x.shape[:-1], x.shape[-1] // 2
    origin = y.to(x.dtype).reshape(*lead, half) if output_origin else x.new_empty(0)
    if quant_mode == 0:
        out, y_scale = _block_fp8(y, _FP8[int(dst_type)], round_scale, 128)
    elif quant_mode == 1:
        out, y_scale = _mx(y, int(dst_type), 32)
    elif quant_mode == 2:
        out, y_scale = _hif8_static(y, scale, group_index)
        return out.reshape(*lead, half), y_scale, origin
    else:
        check(dst_type_max > 0, _OP, f"dst_type_max must be positive, got {dst_type_max}")
        out, y_scale = _hif8_dynamic(y, group_index, dst_type_max)
        return out.reshape(*lead, half), y_scale, origin
    return out.reshape(*lead, out.shape[-1]), y_scale.reshape(*lead, *y_scale.shape[1:]), origin


def _backward_fake(grad_y, x, *, weight=None, y_origin=None, group_index=None, clamp_limit=0.0):
    return torch.empty_like(x), x.new_empty(x.numel() // x.shape[-1], dtype=torch.float32)


@npu_op(
    "npu_swiglu_group_quant_backward(Tensor grad_y, Tensor x, *, Tensor? weight=None, Tensor? y_origin=None, "
    "Tensor? group_index=None, float clamp_limit=0.0) -> (Tensor, Tensor)",
    fake=_backward_fake,
)
def npu_swiglu_group_quant_backward(grad_y, x, *, weight=None, y_origin=None, group_index=None, clamp_limit=0.0):
    """(grad_x in x's dtype, grad_weight float32 per token; zeros without weight)."""
    op = "npu_swiglu_group_quant_backward"
    half = x.shape[-1] // 2
    check(tuple(grad_y.shape) == (*x.shape[:-1], half), op,
          f"grad_y must be {(*x.shape[:-1], half)}, got {tuple(grad_y.shape)}")  # fmt: skip
    raw0, raw1 = x.float().chunk(2, -1)
    x0, x1 = _halves(x, clamp_limit)
    pass0 = (raw0 <= clamp_limit) if clamp_limit > 0 else torch.ones_like(raw0, dtype=torch.bool)
    pass1 = (raw1.abs() <= clamp_limit) if clamp_limit > 0 else torch.ones_like(raw1, dtype=torch.bool)
    rows = x0.numel() // half
    g = grad_y.float().reshape(rows, half)
    real = _real_rows(group_index, rows)
    g = torch.cat([g[:real], g.new_zeros(rows - real, half)])
    w = torch.ones(rows, 1, device=x.device) if weight is None else weight.float().reshape(rows, 1)
    x0, x1 = x0.reshape(rows, half), x1.reshape(rows, half)
    sig = torch.sigmoid(x0)
    silu = x0 * sig
    grad_x0 = g * w * x1 * sig * (1 + x0 * (1 - sig)) * pass0.reshape(rows, half)
    grad_x1 = g * w * silu * pass1.reshape(rows, half)
    grad_weight = (g * silu * x1).sum(-1) if weight is not None else torch.zeros(rows, device=x.device)
    return torch.cat([grad_x0, grad_x1], -1).reshape(x.shape).to(x.dtype), grad_weight
