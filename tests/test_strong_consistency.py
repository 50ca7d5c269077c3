"""torch_npu.npu.set_deterministic_level(2), CANN's strong consistency: a matmul row gives the same bits wherever
it sits and however many rows share the call (torch_npu's test_deterministic_level: mm(a[:1], b) against
mm(a, b)[:1]); the values stay the product's; levels 0 and 1 keep the CPU's results bit for bit."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_npu


@pytest.fixture
def level():
    def set_level(value):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch_npu.npu.set_deterministic_level(value)

    yield set_level
    set_level(0)


def tensors(*shapes, dtype=torch.float32):
    g = torch.Generator().manual_seed(7)
    return [torch.randn(*shape, generator=g).to(dtype).npu() for shape in shapes]


def same(x, y):
    return torch.equal(x.cpu(), y.cpu())


def test_torch_npus_linspace_case(level):
    """torch_npu's own case, smaller: rows of linspace data, the first alone against the first of all."""
    level(2)
    a = torch.linspace(-1000, 1000, 512 * 1024).reshape(512, 1024).npu()
    b = torch.linspace(-1000, 1000, 1024 * 1024).reshape(1024, 1024).npu()
    assert torch_npu.npu._get_deterministic_level() == 2
    assert same(torch.mm(a[:1], b), torch.mm(a, b)[:1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_matmul_operator_gives_a_row_the_same_bits_anywhere(level, dtype):
    level(2)
    a, b, bias, rows = tensors((300, 768), (768, 256), (256,), (300, 256), dtype=dtype)
    x, w, base = tensors((3, 40, 768), (3, 768, 64), (3, 40, 64), dtype=dtype)
    full_mm, full_addmm, full_rows = torch.mm(a, b), torch.addmm(bias, a, b), torch.addmm(rows, a, b, beta=0.5)
    for i in (0, 5, 17, 150, 299):
        assert same(torch.mm(a[i : i + 1], b), full_mm[i : i + 1])
        assert same(torch.addmm(bias, a[i : i + 1], b), full_addmm[i : i + 1])
        assert same(torch.addmm(rows[i : i + 1], a[i : i + 1], b, beta=0.5), full_rows[i : i + 1])
    assert same(torch.mm(a[40:77], b), full_mm[40:77])  # a run of rows across blocks
    assert same(F.linear(a[3:4], b.t(), bias), F.linear(a, b.t(), bias)[3:4])
    assert same(torch.bmm(x[:, 7:8], w), torch.bmm(x, w)[:, 7:8])
    assert same(torch.baddbmm(base[:, 9:10], x[:, 9:10], w), torch.baddbmm(base, x, w)[:, 9:10])
    tol = {"atol": 1e-3, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 0.5, "rtol": 2e-2}
    torch.testing.assert_close(
        full_addmm.cpu().float(), (a.cpu().float() @ b.cpu().float() + bias.cpu().float()), **tol
    )


def test_gradients_are_row_invariant_too(level):
    """The backward's matmuls run in row blocks as well: a row's input gradient is the same bits alone."""
    level(2)
    a, b, upstream = tensors((200, 512), (512, 384), (200, 384))
    whole = a.clone().requires_grad_(True)
    torch.mm(whole, b).backward(upstream)
    for i in (0, 33, 199):
        alone = a[i : i + 1].clone().requires_grad_(True)
        torch.mm(alone, b).backward(upstream[i : i + 1])
        assert same(alone.grad, whole.grad[i : i + 1])


@pytest.mark.parametrize("value", [0, 1])
def test_lower_levels_keep_the_cpus_results(level, value):
    level(value)
    a, b = tensors((300, 768), (768, 256))
    assert same(torch.mm(a, b), a.cpu() @ b.cpu())
    assert torch_npu._C._strong_consistency() is False


def test_leaving_level_two_through_torch_turns_it_off(level):
    level(2)
    assert torch_npu._C._strong_consistency() is True
    torch.use_deterministic_algorithms(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch_npu.npu._get_deterministic_level() == 0
    assert torch_npu._C._strong_consistency() is False
