"""npu_swiglu_mx_quant: a SwiGLU activation followed by MX quantisation (SwiGluMxQuant, MoE expert FFNs).

x [.., 2H] is split along activate_dim into a gated part and a linear part:
- swiglu_mode 0: halves; out = silu(gated) * linear, the gated half on the left when activate_left.
- swiglu_mode 1 (GPT-OSS): even / odd columns; gated clamped to <= clamp_limit, linear to +-clamp_limit;
  out = gated * sigmoid(glu_alpha * gated) * (linear + glu_bias).
- swiglu_mode 2: mode 1's formula on halves.
- swiglu_mode 3: halves; out = min(silu(gated), clamp_limit) * clamp(linear, +-clamp_limit).
The activation is computed in float32 and MX-quantised directly along axis (blocks of 32, e8m0 scales) to dst_type.
group_index (counts, or cumulative ends with group_mode 1) limits the rows computed; rows past its total are zero
(the device leaves them unwritten).

npu_swiglu_mx_quant_with_dual_axis(x [M, 2N]): swiglu_mode 0 along the last dim, then MX quantisation along -1
(y1, mxscale1 [M, ceil(N / 64), 2]) and along -2 (y2, mxscale2). With group_index (cumulative row ends) the
blocks along -2 restart at each group and mxscale2 is [M // 64 + g, N, 2], each group's block scales one after
another (npu_grouped_dynamic_mx_quant's layout). Its default scale_alg is 1 (cuBLAS's rule, FP8 outputs).
_npu_swiglu_backward_mx_quant_with_dual_axis(x [M, 2N], y_grad [M, N]) quantises the SwiGLU backward instead:
d x [M, 2N] (float32, never rounded to x's dtype) along both axes the same way.
"""

import math

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check
from torch_npu.ops.mx_quant import mx_outputs_fake, mx_quantised
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import vjp

__all__ = []

_OP = "npu_swiglu_mx_quant"
_ARGS = (
    "Tensor x, *, Tensor? group_index=None, int activate_dim=-1, bool activate_left=False, int swiglu_mode=0, "
    "float clamp_limit=7.0, float glu_alpha=1.702, float glu_bias=1.0, int group_mode=0, int axis=-1, "
    'int dst_type=296, str round_mode="rint", int scale_alg=0, float max_dtype_value=0'
)


def _check(x, group_index, activate_dim, swiglu_mode, clamp_limit, group_mode, axis):
    check(2 <= x.dim() <= 7, _OP, f"x must have 2 to 7 dims, got {x.dim()}")
    check(x.dtype in (torch.float16, torch.bfloat16), _OP, f"x must be float16 or bfloat16, got {x.dtype}")
    last_two = (-1, -2, x.dim() - 2, x.dim() - 1)
    check(activate_dim in last_two, _OP, f"activate_dim must be one of the last two dims, got {activate_dim}")
    check(axis in last_two, _OP, f"axis must be one of the last two dims, got {axis}")
    check(swiglu_mode in (0, 1, 2, 3), _OP, f"swiglu_mode must be in [0, 3], got {swiglu_mode}")
    trailing = activate_dim % x.dim() == x.dim() - 1
    check(trailing or swiglu_mode == 0, _OP, "swiglu_mode must be 0 when activate_dim is not the last dim")
    check(swiglu_mode < 2 or axis % x.dim() == x.dim() - 1, _OP, "axis must be -1 when swiglu_mode is 2 or 3")
    check(x.shape[activate_dim] % 2 == 0, _OP, f"x's activate_dim size must be even, got {x.shape[activate_dim]}")
    check(clamp_limit > 0 and clamp_limit != float("inf"), _OP, f"clamp_limit must be positive and finite, got {clamp_limit}")  # fmt: skip
    check(group_mode in (0, 1), _OP, f"group_mode must be 0 (counts) or 1 (cumsum), got {group_mode}")
    if group_index is not None:
        check(axis % x.dim() == x.dim() - 1, _OP, "with group_index, vnpu computes axis=-1 only (groups along rows)")


def _activated(x, activate_dim, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias):
    xf = x.float()
    if swiglu_mode == 1:
        gated, linear = xf[..., 0::2], xf[..., 1::2]
    else:
        left, right = xf.chunk(2, dim=activate_dim)
        gated, linear = (left, right) if activate_left else (right, left)
    if swiglu_mode == 0:
        return F.silu(gated) * linear
    linear = linear.clamp(-clamp_limit, clamp_limit)
    if swiglu_mode == 3:
        return F.silu(gated).clamp(max=clamp_limit) * linear
    gated = gated.clamp(max=clamp_limit)
    return gated * torch.sigmoid(glu_alpha * gated) * (linear + glu_bias)


def _fake(x, *, group_index=None, activate_dim=-1, activate_left=False, swiglu_mode=0, clamp_limit=7.0,
          glu_alpha=1.702, glu_bias=1.0, group_mode=0, axis=-1, dst_type=296, round_mode="rint", scale_alg=0,
          max_dtype_value=0):  # fmt: skip
    _check(x, group_index, activate_dim, swiglu_mode, clamp_limit, group_mode, axis)
    shape = list(x.shape)
    shape[activate_dim] //= 2
    return mx_outputs_fake(x.new_empty(shape), axis=axis, round_mode=round_mode, dst_type=dst_type)


@npu_op(f"npu_swiglu_mx_quant({_ARGS}) -> (Tensor, Tensor)", fake=_fake)
def npu_swiglu_mx_quant(x, *, group_index=None, activate_dim=-1, activate_left=False, swiglu_mode=0, clamp_limit=7.0,
                        glu_alpha=1.702, glu_bias=1.0, group_mode=0, axis=-1, dst_type=296, round_mode="rint",
                        scale_alg=0, max_dtype_value=0):  # fmt: skip
    """(y, mxscale): the SwiGLU output MX-quantised along axis."""
    _check(x, group_index, activate_dim, swiglu_mode, clamp_limit, group_mode, axis)
    out = _activated(x, activate_dim, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias)
    if group_index is not None:
        counts = group_index.long()
        total = int(counts[-1] if group_mode == 1 else counts.sum())
        rows = out.reshape(-1, out.shape[-1])
        check(0 <= total <= rows.shape[0], _OP, f"group_index covers {total} rows but x has {rows.shape[0]}")
        rows = torch.cat([rows[:total], rows.new_zeros(rows.shape[0] - total, rows.shape[1])])
        out = rows.reshape(out.shape)
    return mx_quantised(out, axis, round_mode, dst_type, 32, scale_alg, max_dtype_value, op=_OP)


def _dual_outputs_fake(value, group_index, round_mode, dst_type):
    y1, s1 = mx_outputs_fake(value, axis=-1, round_mode=round_mode, dst_type=dst_type)
    y2, s2 = mx_outputs_fake(value, axis=-2, round_mode=round_mode, dst_type=dst_type)
    if group_index is not None:
        s2 = value.new_empty(value.shape[0] // 64 + group_index.shape[0], value.shape[1], 2, dtype=torch.uint8)
    return y1, s1, y2, s2


def _dual_fake(x, *, group_index=None, activate_left=True, round_mode="rint", scale_alg=1, dst_type=24,
               dst_type_max=0):  # fmt: skip
    return _dual_outputs_fake(x.new_empty(*x.shape[:-1], x.shape[-1] // 2), group_index, round_mode, dst_type)


def _check_dual(x, op):
    check(x.dim() == 2, op, f"x must be 2-D [M, 2N], got {tuple(x.shape)}")
    check(x.dtype in (torch.float16, torch.bfloat16), op, f"x must be float16 or bfloat16, got {x.dtype}")
    check(x.shape[-1] % 2 == 0, op, f"x's last dim must be even, got {x.shape[-1]}")


def _dual_axis_quantised(value, group_index, round_mode, scale_alg, dst_type, dst_type_max, op):
    """(y1, mxscale1) along -1 and (y2, mxscale2) along -2 (per group of rows) of value [M, K] (float32)."""
    y1, s1 = mx_quantised(value, -1, round_mode, dst_type, 32, scale_alg, dst_type_max, op=op)
    if group_index is None:
        y2, s2 = mx_quantised(value, -2, round_mode, dst_type, 32, scale_alg, dst_type_max, op=op)
        return y1, s1, y2, s2
    m, n = value.shape
    ends = [int(e) for e in group_index.tolist()]
    check(all(0 <= a <= b for a, b in zip([0, *ends], ends)) and ends and ends[-1] <= m, op,
          f"group_index must be non-decreasing cumulative row ends within M = {m}, got {ends}")  # fmt: skip
    parts, s2 = [], value.new_zeros(m // 64 + len(ends), n, 2, dtype=torch.uint8)
    row = 0
    for start, end in zip([0, *ends], ends):
        if end > start:
            part, scales = mx_quantised(value[start:end], 0, round_mode, dst_type, 32, scale_alg, dst_type_max, op=op)
            parts.append(part)
            s2[row : row + math.ceil((end - start) / 64)] = scales
            row += scales.shape[0]
    rest, _ = mx_quantised(value.new_zeros(m - ends[-1], n), 0, round_mode, dst_type, 32, scale_alg, dst_type_max, op=op)  # fmt: skip
    return y1, s1, torch.cat([*parts, rest]), s2


@npu_op(
    "npu_swiglu_mx_quant_with_dual_axis(Tensor x, *, Tensor? group_index=None, bool activate_left=True, "
    'str round_mode="rint", int scale_alg=1, int dst_type=24, float dst_type_max=0) -> (Tensor, Tensor, Tensor, Tensor)',
    fake=_dual_fake,
)
def npu_swiglu_mx_quant_with_dual_axis(x, *, group_index=None, activate_left=True, round_mode="rint", scale_alg=1,
                                       dst_type=24, dst_type_max=0):  # fmt: skip
    """(y1, mxscale1) along -1 and (y2, mxscale2) along -2 (per group) of the SwiGLU output."""
    op = "npu_swiglu_mx_quant_with_dual_axis"
    _check_dual(x, op)
    out = _activated(x, -1, activate_left, 0, 7.0, 1.0, 0.0)
    return _dual_axis_quantised(out, group_index, round_mode, scale_alg, dst_type, dst_type_max, op)


@npu_op(
    "_npu_swiglu_backward_mx_quant_with_dual_axis(Tensor x, Tensor y_grad, *, Tensor? group_index=None, "
    'bool activate_left=True, str round_mode="rint", int scale_alg=1, int dst_type=24, float dst_type_max=0) '
    "-> (Tensor, Tensor, Tensor, Tensor)",
    fake=lambda x,
    y_grad,
    *,
    group_index=None,
    activate_left=True,
    round_mode="rint",
    scale_alg=1,
    dst_type=24,
    dst_type_max=0: _dual_outputs_fake(x, group_index, round_mode, dst_type),  # fmt: skip
)
def _npu_swiglu_backward_mx_quant_with_dual_axis(x, y_grad, *, group_index=None, activate_left=True,
                                                 round_mode="rint", scale_alg=1, dst_type=24, dst_type_max=0):  # fmt: skip
    """The SwiGLU backward d x [M, 2N] MX-quantised along both axes (see the module doc)."""
    op = "_npu_swiglu_backward_mx_quant_with_dual_axis"
    _check_dual(x, op)
    check(tuple(y_grad.shape) == (x.shape[0], x.shape[1] // 2), op, f"y_grad must be [{x.shape[0]}, {x.shape[1] // 2}], got {tuple(y_grad.shape)}")  # fmt: skip
    forward = lambda t: _activated(t, -1, activate_left, 0, 7.0, 1.0, 0.0)  # noqa: E731
    dx = vjp(forward, [x.float()], [0], [y_grad.float()])[0]
    return _dual_axis_quantised(dx, group_index, round_mode, scale_alg, dst_type, dst_type_max, op)
