"""npu_dynamic_dual_level_mx_quant and npu_dual_level_quant_matmul: FP4 quantisation with two levels of scales
along the last dim, and the matmul of two such operands (DynamicDualLevelMxQuant / DualLevelQuantMatmul).

Quantisation of x [.., K] (float16 / bfloat16; x * smooth_scale first when given):
    level 0, blocks of 512: level0_scale = max|x| / 6 (float32, [.., ceil(K / 512)]), temp = x / level0_scale in
    x's dtype; level 1, blocks of 32 of temp: MX quantisation to float4_e2m1 (e8m0 level1_scale
    [.., ceil(K / 64), 2], y packed two codes per uint8 [.., K / 2]).
The matmul takes x1 [M, K / 2] and x2 [N, K / 2] (the weight, FRACTAL_NZ as on the device) with their level-0
scales (x1's [M, ceil(K / 512)], x2's [ceil(K / 512), N], as aclnnDualLevelQuantMatmulWeightNz lays them out: the
transpose of what the quantisation of x2 returns) and level-1 scales ([rows, ceil(K / 64), 2] each):
out = sum over blocks of 512 of (x1 block . x2 block with the level-1 scales) * both level-0 scales, + bias, in
output_dtype (bfloat16 by default).
"""

import math

import torch

from torch_npu.ops._common import check, dtype_of
from torch_npu.ops.format_cast import get_npu_format
from torch_npu.ops.mx_quant import fp4_values, mx_quantised
from torch_npu.ops.registration import npu_op

__all__ = []

_LEVEL0 = 512
_LEVEL1 = 32
_FP4_MAX = 6.0
_FP4_E2M1 = 296
_FRACTAL_NZ = 29


def _quant_fake(input, *, smooth_scale=None, round_mode="rint"):  # noqa: A002 - op-plugin's argument name
    k = input.shape[-1]
    lead = input.shape[:-1]
    return (input.new_empty(*lead, k // 2, dtype=torch.uint8), input.new_empty(*lead, math.ceil(k / _LEVEL0)),
            input.new_empty(*lead, math.ceil(math.ceil(k / _LEVEL1) / 2), 2, dtype=torch.uint8))  # fmt: skip


@npu_op(
    'npu_dynamic_dual_level_mx_quant(Tensor input, *, Tensor? smooth_scale=None, str round_mode="rint") '
    "-> (Tensor, Tensor, Tensor)",
    fake=_quant_fake,
)
def npu_dynamic_dual_level_mx_quant(input, *, smooth_scale=None, round_mode="rint"):  # noqa: A002
    """(y packed float4_e2m1, level0_scale float32, level1_scale e8m0 bytes)."""
    op = "npu_dynamic_dual_level_mx_quant"
    check(input.dtype in (torch.float16, torch.bfloat16), op, f"input must be float16 or bfloat16, got {input.dtype}")
    check(1 <= input.dim() <= 7, op, f"input must have 1 to 7 dims, got {input.dim()}")
    k = input.shape[-1]
    check(k % 2 == 0, op, f"the last dim of input must be even, got {k}")
    x = input.float()
    if smooth_scale is not None:
        check(smooth_scale.dtype == input.dtype and tuple(smooth_scale.shape) == (k,), op,
              f"smooth_scale must be [{k}] of input's dtype, got {tuple(smooth_scale.shape)} {smooth_scale.dtype}")  # fmt: skip
        x = (input * smooth_scale).float()
    blocks = math.ceil(k / _LEVEL0)
    padded = torch.nn.functional.pad(x, (0, blocks * _LEVEL0 - k)).reshape(*x.shape[:-1], blocks, _LEVEL0)
    level0 = padded.abs().amax(-1) / _FP4_MAX
    divisor = torch.where(level0 > 0, level0, torch.ones_like(level0))
    temp = (padded / divisor[..., None]).reshape(*x.shape[:-1], -1)[..., :k].to(input.dtype)
    y, level1 = mx_quantised(temp, -1, round_mode, _FP4_E2M1, _LEVEL1, op=op)
    return y, level0, level1


def _dequantised(packed, level1, rows, k, name, op):
    """float32 [rows, K] of FP4 codes times their level-1 (e8m0) scales (the level-0 scales stay apart)."""
    check(packed.dtype in (torch.uint8, torch.int8) and tuple(packed.shape) == (rows, k // 2), op,
          f"{name} must be packed float4_e2m1 (uint8) [{rows}, {k // 2}], got {tuple(packed.shape)} {packed.dtype}")  # fmt: skip
    pairs = math.ceil(math.ceil(k / _LEVEL1) / 2)
    check(tuple(level1.shape) == (rows, pairs, 2), op,
          f"{name}_level1_scale must be [{rows}, {pairs}, 2], got {tuple(level1.shape)}")  # fmt: skip
    values = fp4_values(packed.view(torch.uint8), "e2m1")
    powers = torch.exp2(level1.view(torch.uint8).float().reshape(rows, -1) - 127)
    return values * powers.repeat_interleave(_LEVEL1, 1)[:, :k]


def _matmul_fake(x1, x2, x1_level0_scale, x2_level0_scale, x1_level1_scale, x2_level1_scale, *, bias=None,
                 output_dtype=15):  # fmt: skip
    return x1.new_empty(x1.shape[0], x2.shape[0], dtype=dtype_of(output_dtype, "npu_dual_level_quant_matmul"))


@npu_op(
    "npu_dual_level_quant_matmul(Tensor x1, Tensor x2, Tensor x1_level0_scale, Tensor x2_level0_scale, "
    "Tensor x1_level1_scale, Tensor x2_level1_scale, *, Tensor? bias=None, int output_dtype=15) -> Tensor",
    fake=_matmul_fake,
)
def npu_dual_level_quant_matmul(x1, x2, x1_level0_scale, x2_level0_scale, x1_level1_scale, x2_level1_scale, *,
                                bias=None, output_dtype=15):  # fmt: skip
    """x1 @ x2^T of two dual-level FP4 operands, [M, N] in output_dtype."""
    op = "npu_dual_level_quant_matmul"
    check(x1.dim() == 2, op, f"The shape dimension of x1 is only supported to be 2, but it is {x1.dim()}")
    check(x2.dim() == 2, op, f"The shape dimension of x2 is only supported to be 2, but it is {x2.dim()}")
    check(get_npu_format(x2) == _FRACTAL_NZ, op, "x2 only supports NZ format.")
    k1, k2 = x1.shape[1] * 2, x2.shape[1] * 2
    check(k1 == k2, op, f"The k of x1 and x2 should be equal. but x1_k_dim is {k1}, x2_k_dim is {k2}")
    out_dtype = dtype_of(output_dtype, op, "output_dtype")
    check(
        out_dtype in (torch.bfloat16, torch.float16), op, f"output_dtype must be bfloat16 or float16, got {out_dtype}"
    )
    m, n = x1.shape[0], x2.shape[0]
    blocks = math.ceil(k1 / _LEVEL0)
    for name, scale, want in (("x1", x1_level0_scale, (m, blocks)), ("x2", x2_level0_scale, (blocks, n))):
        check(tuple(scale.shape) == want, op,
              f"{name}_level0_scale must be [{want[0]}, {want[1]}], got {tuple(scale.shape)}")  # fmt: skip
    a = _dequantised(x1, x1_level1_scale, m, k1, "x1", op)
    b = _dequantised(x2, x2_level1_scale, n, k1, "x2", op)
    out = torch.zeros(m, n, device=x1.device)
    for block in range(blocks):
        part = slice(block * _LEVEL0, (block + 1) * _LEVEL0)
        scale = x1_level0_scale[:, block].float()[:, None] * x2_level0_scale[block].float()[None, :]
        out = out + (a[:, part] @ b[:, part].t()) * scale
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype)
