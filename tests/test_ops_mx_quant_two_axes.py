"""npu_dynamic_mx_quant_with_dual_axis against npu_dynamic_mx_quant along each axis; npu_dynamic_block_mx_quant
against the 32 x 32 block rule written out block by block (float8 and FP4), with both scale layouts."""

import math

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


@pytest.mark.parametrize("dst", [torch.float8_e4m3fn, 296])
def test_dual_axis_is_mx_quantisation_along_each_axis(dst):
    x = (torch.randn(2, 70, 96, generator=torch.Generator().manual_seed(0)) * 3).to(torch.bfloat16)
    y1, s1, y2, s2 = torch_npu.npu_dynamic_mx_quant_with_dual_axis(x.npu(), dst_type=dst)
    for axis, (y, s) in ((-1, (y1, s1)), (-2, (y2, s2))):
        want_y, want_s = torch_npu.npu_dynamic_mx_quant(x.npu(), axis=axis, dst_type=dst)
        assert torch.equal(y.cpu().view(torch.uint8), want_y.cpu().view(torch.uint8))
        assert torch.equal(s.cpu(), want_s.cpu())
    assert tuple(s1.shape) == (2, 70, 2, 2) and tuple(s2.shape) == (2, 2, 96, 2)


def block_rule(x, emax, dst_type_max=None):
    """Per 32 x 32 block: e = floor(log2(max|v|)) - emax (scale_alg 0) or, given dst_type_max (scale_alg 2), the
    smallest e with 2^e >= max|v| / dst_type_max as a float32 quotient (-127 below float32's normal range); values
    / 2^e; the block exponents [rows, cols]."""
    m, n = x.shape
    rows, cols = math.ceil(m / 32), math.ceil(n / 32)
    exps = torch.zeros(rows, cols)
    scaled = torch.zeros(m, n)
    for i in range(rows):
        for j in range(cols):
            block = x[i * 32 : (i + 1) * 32, j * 32 : (j + 1) * 32].float()
            amax = block.abs().max()
            e = (torch.floor(torch.log2(amax)) - emax).clamp(-127, 127) if amax > 0 else torch.tensor(-127.0)
            if dst_type_max is not None:
                ratio = (amax / (dst_type_max or 6.0)).item()
                e = torch.tensor(-127.0 if ratio < 2.0**-126 else float(math.ceil(math.log2(ratio))))
            exps[i, j] = e
            scaled[i * 32 : (i + 1) * 32, j * 32 : (j + 1) * 32] = block / 2**e
    return scaled, exps


def e2m1_rint(magnitude):
    """|v| rounded to the E2M1 grid: the nearest value, a tie going to the even code (saturating at 6)."""
    grid = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    out = torch.empty_like(magnitude)
    for index, v in enumerate(magnitude.flatten().tolist()):
        distances = [abs(v - g) for g in grid]
        best = min(distances)
        codes = [c for c, d in enumerate(distances) if d == best]
        out.view(-1)[index] = grid[next((c for c in codes if c % 2 == 0), codes[0])]
    return out


@pytest.mark.parametrize("shape", [(64, 96), (40, 70)])
def test_block_mx_quant_float8(shape):
    g = torch.Generator().manual_seed(shape[0])
    x = (torch.randn(*shape, generator=g) * torch.rand(*shape, generator=g) * 50).to(torch.float16)
    y, scale1, scale2 = torch_npu.npu_dynamic_block_mx_quant(x.npu(), dst_type=torch.float8_e4m3fn)
    scaled, exps = block_rule(x, 8)
    assert torch.equal(y.cpu().view(torch.uint8), scaled.to(torch.float8_e4m3fn).view(torch.uint8))
    m, n = shape
    byte = (exps + 127).to(torch.uint8)
    # scale1[m, j // 2, j % 2] is block (m // 32, j); scale2[i // 2, n, i % 2] is block (i, n // 32).
    flat1 = scale1.cpu().reshape(m, -1)[:, : exps.shape[1]]
    assert torch.equal(flat1, byte.repeat_interleave(32, 0)[:m])
    flat2 = scale2.cpu().permute(0, 2, 1).reshape(-1, n)[: exps.shape[0]]
    assert torch.equal(flat2, byte.repeat_interleave(32, 1)[:, :n])


def test_block_mx_quant_fp4_batched():
    x = (torch.randn(2, 32, 64, generator=torch.Generator().manual_seed(5)) * 4).to(torch.bfloat16)
    y, scale1, scale2 = torch_npu.npu_dynamic_block_mx_quant(x.npu(), dst_type=296)
    assert tuple(y.shape) == (2, 32, 32) and y.dtype == torch.uint8
    assert tuple(scale1.shape) == (2, 32, 1, 2) and tuple(scale2.shape) == (2, 1, 64, 2)
    for b in range(2):
        scaled, _ = block_rule(x[b], 2)
        # FP4 codes decoded through npu_anti_mx_quant with unit scales (byte 127), against the scaled values
        # rounded to the nearest E2M1 value, ties to the even code.
        unit = torch.full((32, 1, 2), 127, dtype=torch.uint8)
        decoded = torch_npu.npu_anti_mx_quant(y[b], unit.npu(), dst_type=6, src_type=296).cpu()
        assert torch.equal(decoded.abs(), e2m1_rint(scaled.abs()))
        assert torch.equal(decoded[scaled.abs() > 0.25] < 0, scaled[scaled.abs() > 0.25] < 0)
        assert (decoded.abs() <= 6).all()


@pytest.mark.parametrize("dst_type_max", [0.0, 7.0])
def test_block_mx_quant_dynamic_dtype_range_for_e2m1(dst_type_max):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(64, 96, generator=g) * torch.tensor([0.1, 3.0, 200.0]).repeat_interleave(32)
    x[:32, 32:64] = torch.linspace(-6.5, 6.5, 1024).reshape(32, 32)  # amax 6.5: 2^1 against 6.0, 2^0 against 7.0
    x[32:, :32] = 0.0
    x = x.to(torch.float16)
    y, scale1, scale2 = torch_npu.npu_dynamic_block_mx_quant(x.npu(), dst_type=296, scale_alg=2,
                                                             dst_type_max=dst_type_max)  # fmt: skip
    scaled, exps = block_rule(x, 2, dst_type_max)
    assert exps[0, 1].item() == (1 if dst_type_max == 0.0 else 0) and exps[1, 0].item() == -127
    byte = (exps + 127).to(torch.uint8)
    assert torch.equal(scale1.cpu().reshape(64, -1)[:, :3], byte.repeat_interleave(32, 0))
    assert torch.equal(scale2.cpu().permute(0, 2, 1).reshape(-1, 96)[:2], byte.repeat_interleave(32, 1))
    unit = torch.full((64, 2, 2), 127, dtype=torch.uint8)
    decoded = torch_npu.npu_anti_mx_quant(y, unit.npu(), dst_type=6, src_type=296).cpu()
    assert torch.equal(decoded.abs(), e2m1_rint(scaled.abs()))


def test_block_mx_quant_scale_arguments_are_checked():
    x = torch.zeros(32, 32).half().npu()
    raises_operator_error(
        lambda: torch_npu.npu_dynamic_block_mx_quant(x, dst_type=292, scale_alg=1),
        "npu_dynamic_block_mx_quant: scale_alg must be 0 or 2, got 1",
    )
    raises_operator_error(
        lambda: torch_npu.npu_dynamic_block_mx_quant(x, dst_type=296, scale_alg=2, dst_type_max=8.0),
        "npu_dynamic_block_mx_quant: dst_type_max must be 0.0, 6.0 or 7.0, got 8.0",
    )


def test_block_mx_quant_refuses_other_ranks_and_dtypes():
    raises_operator_error(
        lambda: torch_npu.npu_dynamic_block_mx_quant(torch.zeros(64).half().npu()),
        "npu_dynamic_block_mx_quant: input must have 2 or 3 dims, got 1",
    )
    raises_operator_error(
        lambda: torch_npu.npu_dynamic_block_mx_quant(torch.zeros(32, 32).npu(), dst_type=292),
        "npu_dynamic_block_mx_quant: input must be float16 or bfloat16, got torch.float32",
    )
