"""The redirect's CPU aliases are recycled per thread: an alias nothing references after its call is
re-pointed at a later argument. Recycled aliases must be indistinguishable from fresh ones: every dtype,
geometry, conj/neg view, out= resize, set_, inference mode and thread sees the CPU's results."""

import threading

import pytest
import torch

import torch_npu


def same(npu, cpu):
    assert npu.device.type == "npu"
    assert npu.dtype == cpu.dtype and npu.shape == cpu.shape and npu.stride() == cpu.stride()
    assert torch.equal(npu.cpu(), cpu)


def test_steady_operator_calls_build_no_new_aliases():
    a = torch.randn(16, device="npu")
    b = torch.randn(4, 4, device="npu")

    def step():
        c = a + 1
        b.mul_(1.0)
        d = torch.mm(b, b)
        return c.sum() + d.sum()

    for _ in range(5):
        step()
    before = torch_npu._C._redirect_aliases_built()
    for _ in range(200):
        step()
    assert torch_npu._C._redirect_aliases_built() - before == 0


def test_alternating_dtypes_and_geometries_compute_like_the_cpu():
    torch.manual_seed(0)
    base = torch.randn(6, 8)
    nbase = base.to("npu")
    cases = [
        lambda t: t,
        lambda t: t.to(torch.int64),
        lambda t: t > 0,
        lambda t: t.to(torch.bfloat16),
        lambda t: torch.complex(t, t.flip(0)),
        lambda t: t.t(),
        lambda t: t[1:, 2::3],
        lambda t: t.as_strided((3, 3), (1, 8), 5),
        lambda t: t[:, :1].expand(6, 5),
    ]
    for _ in range(3):  # every case reuses an alias another dtype or geometry left behind
        for view in cases:
            cpu, npu = view(base), view(nbase)
            same(npu * 2, cpu * 2)
            same(npu.sum(0), cpu.sum(0))


def test_a_scalar_after_a_one_element_vector_reduces_like_the_cpu():
    # linalg_vector_norm(dim=0) reads sizes()[0] of a 0-dim tensor: a fresh tensor's leftover 0, never the
    # size a recycled alias had before (1 would take its abs() path and turn -nan into +nan).
    scalar = torch.tensor(float("nan")).neg()
    nscalar = scalar.to("npu")
    for _ in range(3):
        torch.ones(1, device="npu") + 0
        npu, cpu = torch.linalg.vector_norm(nscalar, dim=0), torch.linalg.vector_norm(scalar, dim=0)
        assert torch.equal(npu.cpu().view(torch.int32), cpu.view(torch.int32))


def test_conjugate_and_negative_views_leave_no_bit_behind():
    z = torch.complex(torch.arange(4.0), torch.arange(4.0, 8.0))
    nz = z.to("npu")
    plain = torch.arange(4.0)
    nplain = plain.to("npu")
    for _ in range(3):
        same(nz.conj() * 1, z.conj() * 1)
        same(torch._neg_view(nz) + 0, torch._neg_view(z) + 0)
        same(nz * 1, z * 1)  # the next alias of a complex tensor carries neither bit
        same(nplain + 1, plain + 1)


def test_out_resizes_and_set_then_more_operators():
    a, b = torch.randn(5), torch.randn(5)
    na, nb = a.to("npu"), b.to("npu")
    out, nout = torch.empty(0), torch.empty(0, device="npu")
    torch.add(a, b, out=out)
    torch.add(na, nb, out=nout)
    same(nout, out)
    same(na * nb, a * b)
    x, nx = torch.zeros(2), torch.zeros(2, device="npu")
    x.set_(out)
    nx.set_(nout)
    same(nx, x)
    same(nx + na, x + a)
    nout.add_(1)
    assert torch.equal(nx.cpu(), out + 1)


def test_arguments_over_one_storage_still_alias_each_other():
    a = torch.arange(6.0)
    na = a.to("npu")
    same(na.add_(na), a.add_(a))
    same(na[::2] * na[1::2], a[::2] * a[1::2])
    with pytest.raises(RuntimeError) as cpu_error:
        torch.add(a[:3], a[1:4], out=a[1:4])
    with pytest.raises(RuntimeError) as npu_error:
        torch.add(na[:3], na[1:4], out=na[1:4])
    assert str(npu_error.value) == str(cpu_error.value)


def test_inference_mode_and_autograd_alternate():
    w = torch.randn(3, 3)
    nw = w.to("npu").requires_grad_()
    w.requires_grad_()
    x = torch.randn(2, 3)
    nx = x.to("npu")
    for _ in range(3):
        with torch.inference_mode():
            same(nx @ nw, x @ w)
        (nx @ nw).square().sum().backward()
        (x @ w).square().sum().backward()
        same(nw.grad, w.grad)
    with torch.inference_mode():
        inference, ninference = torch.ones(2), torch.ones(2, device="npu")
    with pytest.raises(RuntimeError) as cpu_error:
        inference.add_(1)
    with pytest.raises(RuntimeError) as npu_error:
        ninference.add_(1)
    assert str(npu_error.value) == str(cpu_error.value)


def test_threads_each_recycle_their_own_aliases():
    torch.manual_seed(0)
    shared = torch.randn(64, 64)
    nshared = shared.to("npu")
    expected = (shared @ shared).tanh() + shared
    results, errors = [], []

    def work():
        try:
            for _ in range(50):
                results.append((nshared @ nshared).tanh() + nshared)
        except RuntimeError as error:  # reported below: a thread's exception would otherwise be lost
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(results) == 200
    for r in results:
        assert torch.equal(r.cpu(), expected)
