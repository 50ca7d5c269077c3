"""npu_add_quant_matmul(_) / npu_add_quant_gmm(_) against the documented formulas written out in float64: MX (per
block of 32 along K, both e8m0 scales), T-T / T-C with HiFloat8 codes; in place and out of place agree; compile."""

import math

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error
from torch_npu.utils import hifloat8

E8M0 = torch_npu.float8_e8m0fnu


def fp8(shape, g, dtype=torch.float8_e4m3fn):
    return (torch.randn(*shape, generator=g) * 4).to(dtype)


def scale_bytes(shape, g):
    return torch.randint(120, 134, shape, generator=g, dtype=torch.uint8)


def mx_formula(a, b, sa, sb):
    """sum_j (sum_{k in block j} a[m, k] b[k, n]) * 2^(sa[m, j] - 127) * 2^(sb[j, n] - 127), float64."""
    a, b = a.double(), b.double()
    k = a.shape[1]
    total = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
    for j in range(math.ceil(k / 32)):
        part = a[:, j * 32 : (j + 1) * 32] @ b[j * 32 : (j + 1) * 32]
        fa = torch.exp2(sa.reshape(a.shape[0], -1)[:, j].double() - 127)
        fb = torch.exp2(sb.permute(0, 2, 1).reshape(-1, b.shape[1])[j].double() - 127)
        total += part * fa[:, None] * fb[None, :]
    return total


@pytest.mark.parametrize("k", [64, 80])
def test_mx_matmul_accumulates_the_block_scaled_product(k):
    g = torch.Generator().manual_seed(k)
    m, n = 5, 6
    y = torch.randn(m, n, generator=g)
    x1, x2 = fp8((m, k), g), fp8((k, n), g, torch.float8_e5m2)
    s1 = scale_bytes((m, math.ceil(k / 64), 2), g)
    s2 = scale_bytes((math.ceil(k / 64), n, 2), g)
    want = y.double() + mx_formula(x1.float(), x2.float(), s1, s2)
    args = (x1.npu(), x2.npu(), s2.npu())
    kwargs = {"x1_scale": s1.npu(), "x1_scale_dtype": E8M0, "x2_scale_dtype": E8M0, "group_sizes": [1, 1, 32]}
    out = torch_npu.npu_add_quant_matmul(y.npu(), *args, **kwargs)
    torch.testing.assert_close(out.cpu().double(), want, rtol=1e-5, atol=1e-4)
    target = y.npu()
    returned = torch_npu.npu_add_quant_matmul_(target, *args, **kwargs)
    assert returned.data_ptr() == target.data_ptr() and torch.equal(target.cpu(), out.cpu())


def test_hifloat8_tt_matmul():
    g = torch.Generator().manual_seed(2)
    x1 = hifloat8.encode(torch.randn(4, 16, generator=g))
    x2 = hifloat8.encode(torch.randn(16, 3, generator=g))
    y = torch.randn(4, 3, generator=g)
    s1, s2 = torch.tensor([0.5]), torch.tensor([3.0])
    out = torch_npu.npu_add_quant_matmul(
        y.npu(), x1.npu(), x2.npu(), s2.npu(), x1_scale=s1.npu(), x1_dtype=torch_npu.hifloat8,
        x2_dtype=torch_npu.hifloat8, group_sizes=[0, 0, 0],
    )  # fmt: skip
    want = y.double() + (hifloat8.decode(x1).double() @ hifloat8.decode(x2).double()) * 1.5
    torch.testing.assert_close(out.cpu().double(), want, rtol=1e-5, atol=1e-5)


def test_mx_gmm_groups_k_with_fresh_scale_rows_per_group():
    g = torch.Generator().manual_seed(4)
    m, n, sizes = 3, 4, [40, 0, 96]
    k, groups = sum(sizes), len(sizes)
    x1, x2 = fp8((m, k), g), fp8((k, n), g)
    rows = k // 64 + groups
    s1, s2 = scale_bytes((m, rows, 2), g), scale_bytes((rows, n, 2), g)
    y = torch.randn(groups, m, n, generator=g)
    out = torch_npu.npu_add_quant_gmm(
        y.npu(), x1.npu(), x2.npu(), s2.npu(), torch.tensor(sizes).npu(), x1_scale=s1.npu(), group_list_type=1,
        x1_scale_dtype=E8M0, x2_scale_dtype=E8M0,
    )  # fmt: skip
    start, pair = 0, 0
    for i, size in enumerate(sizes):
        pairs = math.ceil(size / 64)
        part = mx_formula(x1[:, start : start + size].float(), x2[start : start + size].float(),
                          s1[:, pair : pair + pairs], s2[pair : pair + pairs])  # fmt: skip
        torch.testing.assert_close(out[i].cpu().double(), y[i].double() + part, rtol=1e-5, atol=1e-4)
        start, pair = start + size, pair + pairs
    assert torch.equal(out[1].cpu(), y[1])


def test_hifloat8_tc_gmm_in_place_and_under_compile():
    g = torch.Generator().manual_seed(6)
    m, n, ends = 2, 3, [5, 12]
    x1 = hifloat8.encode(torch.randn(m, 12, generator=g))
    x2 = hifloat8.encode(torch.randn(12, n, generator=g))
    s1, s2 = torch.rand(2, generator=g), torch.rand(2, n, generator=g)
    y = torch.randn(2, m, n, generator=g)
    kwargs = {"x1_scale": s1.npu(), "x1_dtype": torch_npu.hifloat8, "x2_dtype": torch_npu.hifloat8}
    target = y.npu()
    torch_npu.npu_add_quant_gmm_(target, x1.npu(), x2.npu(), s2.npu(), torch.tensor(ends).npu(), **kwargs)
    a, b = hifloat8.decode(x1).double(), hifloat8.decode(x2).double()
    for i, (lo, hi) in enumerate([(0, 5), (5, 12)]):
        want = y[i].double() + (a[:, lo:hi] @ b[lo:hi]) * s1[i].double() * s2[i].double()
        torch.testing.assert_close(target[i].cpu().double(), want, rtol=1e-5, atol=1e-5)

    def step(acc, x1, x2, s2, group_list, s1):
        return torch_npu.npu_add_quant_gmm_(acc, x1, x2, s2, group_list, x1_scale=s1, x1_dtype=torch_npu.hifloat8,
                                            x2_dtype=torch_npu.hifloat8)  # fmt: skip

    compiled_target = y.npu()
    torch.compile(step, backend="aot_eager", fullgraph=True)(
        compiled_target, x1.npu(), x2.npu(), s2.npu(), torch.tensor(ends).npu(), s1.npu()
    )
    assert torch.equal(compiled_target.cpu(), target.cpu())


def test_refuses_mixed_scales_and_bad_group_sizes():
    g = torch.Generator().manual_seed(8)
    x1, x2 = fp8((2, 64), g), fp8((64, 3), g)
    s1, s2 = scale_bytes((2, 1, 2), g), scale_bytes((1, 3, 2), g)
    raises_operator_error(
        lambda: torch_npu.npu_add_quant_matmul(
            torch.zeros(2, 3).npu(), x1.npu(), x2.npu(), s2.npu(), x1_scale=torch.ones(1).npu(), x2_scale_dtype=E8M0
        ),
        "npu_add_quant_matmul: x1_scale and x2_scale must both be e8m0 (MX) or both float32",
    )
    raises_operator_error(
        lambda: torch_npu.npu_add_quant_matmul(
            torch.zeros(2, 3).npu(),
            x1.npu(),
            x2.npu(),
            s2.npu(),
            x1_scale=s1.npu(),
            x1_scale_dtype=E8M0,
            x2_scale_dtype=E8M0,
            group_sizes=[1, 32],
        ),  # fmt: skip
        "npu_add_quant_matmul: When group_sizes is not empty, it only supports input with 3 elements, but got 2",
    )
