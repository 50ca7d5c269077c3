"""npu_dynamic_dual_level_mx_quant: level-0 scales against max|x| / 6 per 512, the level-1 step against MX
quantisation of x / level0; npu_dual_level_quant_matmul against the dequantised product written out in float64
(codes decoded with the E2M1 table), the NZ weight requirement and the shape errors."""

import math

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def decode(packed, level0, level1):
    codes = torch.stack([packed & 0xF, packed >> 4], -1).reshape(packed.shape[0], -1).long()
    k = codes.shape[1]
    l1 = torch.exp2(level1.reshape(packed.shape[0], -1).double() - 127).repeat_interleave(32, 1)[:, :k]
    l0 = level0.double().repeat_interleave(512, 1)[:, :k]
    return E2M1.double()[codes] * l1 * l0


@pytest.mark.parametrize("k", [1024, 96])
def test_quantisation_levels(k):
    g = torch.Generator().manual_seed(k)
    x = (torch.randn(3, k, generator=g) * 5).to(torch.bfloat16)
    y, level0, level1 = torch_npu.npu_dynamic_dual_level_mx_quant(x.npu())
    assert tuple(y.shape) == (3, k // 2) and tuple(level0.shape) == (3, math.ceil(k / 512))
    assert tuple(level1.shape) == (3, math.ceil(k / 64), 2)
    blocks = torch.nn.functional.pad(x.float(), (0, level0.shape[1] * 512 - k)).reshape(3, -1, 512)
    torch.testing.assert_close(level0.cpu(), blocks.abs().amax(-1) / 6.0)
    temp = (x.float() / level0.cpu().repeat_interleave(512, 1)[:, :k]).to(torch.bfloat16)
    want_y, want_l1 = torch_npu.npu_dynamic_mx_quant(temp.npu(), dst_type=296)
    assert torch.equal(y.cpu(), want_y.cpu()) and torch.equal(level1.cpu(), want_l1.cpu())
    # Within FP4's resolution of the original values: error at most a quarter of each block's level-1 scale x 6.
    restored = decode(y.cpu(), level0.cpu(), level1.cpu())
    assert (restored - x.double()).abs().max() <= 0.5 * blocks.abs().max()


def test_smooth_scale_multiplies_first():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 64, generator=g).to(torch.float16)
    smooth = (torch.rand(64, generator=g) + 0.5).to(torch.float16)
    got = torch_npu.npu_dynamic_dual_level_mx_quant(x.npu(), smooth_scale=smooth.npu())
    want = torch_npu.npu_dynamic_dual_level_mx_quant((x * smooth).npu())
    assert all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(got, want))


def operands(m, n, k, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    qa = torch_npu.npu_dynamic_dual_level_mx_quant(a.npu())
    qb = torch_npu.npu_dynamic_dual_level_mx_quant(b.npu())
    return a, b, qa, qb


@pytest.mark.parametrize("k", [1024, 64])
def test_matmul_matches_the_dequantised_product(k):
    a, b, (y1, l01, l11), (y2, l02, l12) = operands(4, 5, k, k)
    bias = torch.randn(5)
    weight = torch_npu.npu_format_cast(y2, 29)
    # x2's level-0 scales go in as [ceil(K / 512), N], the transpose of the quantisation's [N, ceil(K / 512)].
    out = torch_npu.npu_dual_level_quant_matmul(y1, weight, l01, l02.t().contiguous(), l11, l12, bias=bias.npu())
    want = decode(y1.cpu(), l01.cpu(), l11.cpu()) @ decode(y2.cpu(), l02.cpu(), l12.cpu()).t() + bias.double()
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu().double(), want.to(torch.bfloat16).double(), rtol=1e-2, atol=1e-2)
    # FP4 is coarse, but the product still tracks the unquantised one.
    exact = a.double() @ b.double().t() + bias.double()
    assert torch.corrcoef(torch.stack([out.cpu().double().flatten(), exact.flatten()]))[0, 1] > 0.9


def test_matmul_refuses_an_nd_weight_and_mismatched_k():
    _, _, (y1, l01, l11), (y2, l02, l12) = operands(2, 3, 64, 3)
    raises_operator_error(
        lambda: torch_npu.npu_dual_level_quant_matmul(y1, y2, l01, l02, l11, l12),
        "npu_dual_level_quant_matmul: x2 only supports NZ format.",
    )
    raises_operator_error(
        lambda: torch_npu.npu_dual_level_quant_matmul(y1, torch_npu.npu_format_cast(y2, 29), l01, l02, l11, l12),
        "npu_dual_level_quant_matmul: x2_level0_scale must be [1, 3], got (3, 1)",
    )
    weight = torch_npu.npu_format_cast(y2[:, :16].contiguous(), 29)
    raises_operator_error(
        lambda: torch_npu.npu_dual_level_quant_matmul(y1, weight, l01, l02, l11, l12),
        "npu_dual_level_quant_matmul: The k of x1 and x2 should be equal. but x1_k_dim is 64, x2_k_dim is 32",
    )
