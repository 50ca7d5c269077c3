"""npu_transpose_quant_batchmatmul against the permuted batched product written out in float64: per-token /
per-channel float32 scales, MX scales from npu_dynamic_mx_quant (viewed as float8_e8m0fnu, as vLLM passes them),
batch_split_factor, bias; and the permutation errors op-plugin's tests expect."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


def fp8(shape, g, dtype=torch.float8_e4m3fn):
    return torch.randint(-5, 5, shape, generator=g).to(dtype)


@pytest.mark.parametrize("dst, split", [(torch.float16, 1), (torch.bfloat16, 2)])
def test_per_token_per_channel(dst, split):
    g = torch.Generator().manual_seed(0)
    m, batch, k, n = 6, 4, 32, 8
    x1, x2 = fp8((m, batch, k), g, torch.float8_e5m2), fp8((batch, k, n), g)
    s1, s2 = torch.rand(m, generator=g), torch.rand(n, generator=g)
    out = torch_npu.npu_transpose_quant_batchmatmul(
        x1.npu(), x2.npu(), dst, x1_scale=s1.npu(), x2_scale=s2.npu(), batch_split_factor=split
    )
    product = torch.matmul(x1.double().transpose(0, 1), x2.double()).transpose(0, 1)  # [M, B, N]
    want = product * s1.double()[:, None, None] * s2.double()
    if split > 1:
        want = want.reshape(m, split, -1).transpose(0, 1)
    assert out.dtype == dst and out.shape == want.shape
    torch.testing.assert_close(out.cpu().double(), want.to(dst).double())


def test_mx_scales_as_vllm_passes_them():
    g = torch.Generator().manual_seed(1)
    m, batch, k, n = 3, 2, 64, 5
    a = torch.randn(m, batch, k, generator=g).to(torch.bfloat16)
    w = torch.randn(batch, k, n, generator=g).to(torch.bfloat16)
    qa, sa = torch_npu.npu_dynamic_mx_quant(a.npu(), dst_type=torch.float8_e4m3fn)
    qw, sw = torch_npu.npu_dynamic_mx_quant(w.npu(), axis=-2, dst_type=torch.float8_e4m3fn)
    bias = torch.randn(n, generator=g)
    out = torch_npu.npu_transpose_quant_batchmatmul(
        qa, qw, torch.bfloat16, bias=bias.npu(), group_sizes=(0, 0, 32),
        x1_scale=sa.view(torch.float8_e8m0fnu), x2_scale=sw.view(torch.float8_e8m0fnu),
    )  # fmt: skip
    deq_a = torch_npu.npu_anti_mx_quant(qa, sa, dst_type=6, src_type=292).cpu().double()
    deq_w = torch_npu.npu_anti_mx_quant(qw, sw, axis=-2, dst_type=6, src_type=292).cpu().double()
    want = torch.einsum("mbk,bkn->mbn", deq_a, deq_w) + bias.double()
    torch.testing.assert_close(out.cpu().double(), want.to(torch.bfloat16).double(), rtol=1e-2, atol=1e-2)
    exact = torch.einsum("mbk,bkn->mbn", a.double(), w.double())
    assert (out.cpu().double() - exact).abs().max() < 0.15 * exact.abs().max()


@pytest.mark.parametrize("name", ["perm_x1", "perm_x2", "perm_y"])
def test_refuses_other_permutations(name):
    g = torch.Generator().manual_seed(2)
    x1, x2 = fp8((2, 2, 32), g), fp8((2, 32, 4), g)
    kwargs = {"x1_scale": torch.ones(2).npu(), "x2_scale": torch.ones(4).npu(), name: [1, 1, 2]}
    want = {"perm_x1": "[1, 0, 2]", "perm_x2": "[0, 1, 2]", "perm_y": "[1, 0, 2]"}[name]
    raises_operator_error(
        lambda: torch_npu.npu_transpose_quant_batchmatmul(x1.npu(), x2.npu(), torch.float16, **kwargs),
        f"npu_transpose_quant_batchmatmul: {name} should be {want}, got [1, 1, 2]",
    )
