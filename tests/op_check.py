"""The checks every torch_npu operator gets: npu result vs an independent PyTorch composition on
the CPU, gradients vs autograd of that composition, fake-kernel shapes vs real shapes, and
torch.compile(fullgraph=True) through the operator."""

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_flatten, tree_map


def _to(value, device):
    return tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, value)


def _assert_close(got, want, atol, rtol, what):
    got_flat, _ = tree_flatten(got)
    want_flat, _ = tree_flatten(want)
    assert len(got_flat) == len(want_flat), f"{what}: {len(got_flat)} outputs, expected {len(want_flat)}"
    for i, (g, w) in enumerate(zip(got_flat, want_flat)):
        if isinstance(w, torch.Tensor):
            assert isinstance(g, torch.Tensor), f"{what}[{i}] is not a tensor"
            assert g.shape == w.shape, f"{what}[{i}]: shape {tuple(g.shape)} != {tuple(w.shape)}"
            assert g.dtype == w.dtype, f"{what}[{i}]: dtype {g.dtype} != {w.dtype}"
            torch.testing.assert_close(
                g.detach().cpu(),
                w.detach().cpu(),
                atol=atol,
                rtol=rtol,
                equal_nan=True,
                msg=lambda m, i=i: f"{what}[{i}]: {m}",
            )
        else:
            assert g == w, f"{what}[{i}]: {g} != {w}"


def check_op(op, args, reference, kwargs=None, *, grad=(), atol=1e-5, rtol=1e-5, fake=True, compile=True):
    """op(*args on npu) against reference(*args on cpu). grad: indices of args to differentiate."""
    kwargs = kwargs or {}
    npu_args, npu_kwargs = _to(args, "npu"), _to(kwargs, "npu")
    out = op(*npu_args, **npu_kwargs)
    want = reference(*_to(args, "cpu"), **_to(kwargs, "cpu"))
    _assert_close(out, want, atol, rtol, "output")
    if fake:
        mode = FakeTensorMode()
        to_fake = lambda v: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v  # noqa: E731
        fake_args, fake_kwargs = tree_map(to_fake, npu_args), tree_map(to_fake, npu_kwargs)
        with mode:
            fake_out = op(*fake_args, **fake_kwargs)
        for i, (f, r) in enumerate(zip(tree_flatten(fake_out)[0], tree_flatten(out)[0])):
            if isinstance(r, torch.Tensor):
                assert (
                    f.shape == r.shape and f.dtype == r.dtype
                ), f"fake output {i}: {tuple(f.shape)} {f.dtype} != real {tuple(r.shape)} {r.dtype}"
    if compile:
        torch._dynamo.reset()
        compiled = torch.compile(lambda *a: op(*a, **npu_kwargs), backend="aot_eager", fullgraph=True)
        _assert_close(compiled(*npu_args), out, atol, rtol, "compiled output")
    if grad:
        _check_grad(op, args, reference, kwargs, grad, atol, rtol)
    return out


def _check_grad(op, args, reference, kwargs, grad, atol, rtol):
    def leaves(device):
        values = list(_to(args, device))
        for i in grad:
            values[i] = values[i].detach().clone().requires_grad_(True)
        return values

    npu_args, cpu_args = leaves("npu"), leaves("cpu")
    pairs = [
        (o, r)
        for o, r in zip(
            tree_flatten(op(*npu_args, **_to(kwargs, "npu")))[0],
            tree_flatten(reference(*cpu_args, **_to(kwargs, "cpu")))[0],
        )
        if isinstance(r, torch.Tensor) and r.requires_grad
    ]
    assert pairs and all(
        o.requires_grad for o, _ in pairs
    ), "the outputs the reference differentiates must be differentiable"
    outs, refs = [o for o, _ in pairs], [r for _, r in pairs]
    gen = torch.Generator().manual_seed(1)
    weights = [torch.randn(r.shape, generator=gen, dtype=r.dtype) for r in refs]
    sum(((o * w.npu()).sum() for o, w in zip(outs, weights)), torch.zeros((), device="npu")).backward()
    sum(((r * w).sum() for r, w in zip(refs, weights)), torch.zeros(())).backward()
    for i in grad:
        assert npu_args[i].grad is not None, f"no gradient for argument {i}"
        torch.testing.assert_close(
            npu_args[i].grad.cpu(),
            cpu_args[i].grad,
            atol=atol * 10,
            rtol=rtol * 10,
            msg=lambda m, i=i: f"gradient of argument {i}: {m}",
        )
