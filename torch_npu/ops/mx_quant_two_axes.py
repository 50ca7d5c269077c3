"""MX quantisation along both of the last two axes, for operands used as they are and transposed:

- npu_dynamic_mx_quant_with_dual_axis(x [.., M, N]): two independent MX quantisations, along -1
  (y1, mxscale1 [.., M, ceil(N / 64), 2]) and along -2 (y2, mxscale2 [.., ceil(M / 64), N, 2]).
- npu_dynamic_block_mx_quant(x [.., M, N], 2-3 dims): one shared e8m0 scale per 32 x 32 block, y quantised once;
  the block scale is returned broadcast to both layouts (scale1 along -1, scale2 along -2, rows paired).
FP4 outputs pack two codes per uint8 along the last dim. scale_alg and dst_type_max as in npu_dynamic_mx_quant
(0, the OCP rule; 1 for FP8 and 2 for float4_e2m1, with dst_type_max 0.0, 6.0 or 7.0 for the block operator).
"""

import math

import torch

from torch_npu.ops._common import check
from torch_npu.ops.mx_quant import (
    block_exponents,
    mx_destination,
    mx_encoded,
    mx_outputs_fake,
    mx_quantised,
    mx_scale_layout,
)
from torch_npu.ops.registration import npu_op

__all__ = []

_BLOCK = 32


def _dual_fake(input, *, round_mode="rint", dst_type=296, scale_alg=0, dst_type_max=0.0):  # noqa: A002
    y1, s1 = mx_outputs_fake(input, axis=-1, round_mode=round_mode, dst_type=dst_type)
    y2, s2 = mx_outputs_fake(input, axis=-2, round_mode=round_mode, dst_type=dst_type)
    return y1, s1, y2, s2


@npu_op(
    'npu_dynamic_mx_quant_with_dual_axis(Tensor input, *, str round_mode="rint", int dst_type=296, int scale_alg=0, '
    "float? dst_type_max=0.0) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=_dual_fake,
)
def npu_dynamic_mx_quant_with_dual_axis(input, *, round_mode="rint", dst_type=296, scale_alg=0, dst_type_max=0.0):  # noqa: A002
    """(y1, mxscale1) quantised along -1 and (y2, mxscale2) along -2."""
    op = "npu_dynamic_mx_quant_with_dual_axis"
    check(input.dim() >= 2, op, f"input must have at least 2 dims, got {input.dim()}")
    limit = dst_type_max or 0.0
    y1, s1 = mx_quantised(input, -1, round_mode, dst_type, _BLOCK, scale_alg, limit, op=op)
    y2, s2 = mx_quantised(input, -2, round_mode, dst_type, _BLOCK, scale_alg, limit, op=op)
    return y1, s1, y2, s2


def _block_fake(input, *, round_mode="rint", dst_type=296, scale_alg=0, dst_type_max=0.0):  # noqa: A002
    y, scale1 = mx_outputs_fake(input, axis=-1, round_mode=round_mode, dst_type=dst_type)
    _, scale2 = mx_outputs_fake(input, axis=-2, round_mode=round_mode, dst_type=dst_type)
    return y, scale1, scale2


@npu_op(
    'npu_dynamic_block_mx_quant(Tensor input, *, str round_mode="rint", int dst_type=296, int scale_alg=0, '
    "float dst_type_max=0.0) -> (Tensor, Tensor, Tensor)",
    fake=_block_fake,
)
def npu_dynamic_block_mx_quant(input, *, round_mode="rint", dst_type=296, scale_alg=0, dst_type_max=0.0):  # noqa: A002
    """(y, scale1, scale2): one e8m0 scale per 32 x 32 block, laid out along -1 and along -2."""
    op = "npu_dynamic_block_mx_quant"
    dst, emax = mx_destination(dst_type, round_mode, scale_alg, dst_type_max, 0.0, op)
    check(scale_alg in (0, 2), op, f"scale_alg must be 0 or 2, got {scale_alg}")
    check(dst_type_max in (0.0, 6.0, 7.0), op, f"dst_type_max must be 0.0, 6.0 or 7.0, got {dst_type_max}")
    check(input.dtype in (torch.float16, torch.bfloat16), op, f"input must be float16 or bfloat16, got {input.dtype}")
    check(input.dim() in (2, 3), op, f"input must have 2 or 3 dims, got {input.dim()}")
    *lead, m, n = input.shape
    rows, cols = math.ceil(m / _BLOCK), math.ceil(n / _BLOCK)
    padded = torch.nn.functional.pad(input.float(), (0, cols * _BLOCK - n, 0, rows * _BLOCK - m))
    blocks = padded.reshape(*lead, rows, _BLOCK, cols, _BLOCK)
    exponent = block_exponents(blocks.abs().amax((-3, -1)), dst, emax, scale_alg, dst_type_max)  # [.., rows, cols]
    scaled = (blocks / torch.exp2(exponent)[..., :, None, :, None]).reshape(padded.shape)[..., :m, :n]
    y = mx_encoded(scaled, dst, round_mode, op)
    scale_bytes = (exponent + 127).to(torch.uint8)
    per_row = scale_bytes.repeat_interleave(_BLOCK, -2)[..., :m, :]  # [.., M, cols]
    per_col = scale_bytes.repeat_interleave(_BLOCK, -1)[..., :, :n]  # [.., rows, N]
    return y, mx_scale_layout(per_row, -1), mx_scale_layout(per_col, -2)
