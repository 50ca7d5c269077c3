"""npu_quant_scatter(_) against quantising (round(updates / scale + zero point), saturated to int8) and
writing each batch's slice at its index, done here by hand."""

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import torch_npu


def _inputs(seed, zero_points=False):
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(-5, 5, (3, 6, 16), generator=g, dtype=torch.int8)
    indices = torch.tensor([0, 4, 2], dtype=torch.int32)
    updates = (torch.randn(3, 2, 16, generator=g) * 3).to(torch.bfloat16)
    scales = (torch.rand(1, 1, 16, generator=g) * 0.2 + 0.01).to(torch.bfloat16)
    offsets = torch.randint(-3, 3, (1, 1, 16), generator=g).to(torch.bfloat16) if zero_points else None
    return data, indices, updates, scales, offsets


def reference(data, indices, updates, scales, offsets):
    q = updates.float() / scales.float().view(-1)
    if offsets is not None:
        q = q + offsets.float().view(-1)
    q = torch.round(q).clamp(-128, 127).to(torch.int8)
    out = data.clone()
    for b, start in enumerate(indices.tolist()):
        out[b, start : start + updates.shape[1]] = q[b]
    return out


@pytest.mark.parametrize("zero_points", [False, True])
def test_quant_scatter_quantises_then_writes_each_batch_slice(zero_points):
    data, indices, updates, scales, offsets = _inputs(0, zero_points)
    want = reference(data, indices, updates, scales, offsets)
    npu_args = [t.npu() if t is not None else None for t in (data, indices, updates, scales, offsets)]
    out = torch_npu.npu_quant_scatter(*npu_args)
    assert out.dtype == torch.int8 and torch.equal(out.cpu(), want)
    assert torch.equal(npu_args[0].cpu(), data)  # the out-of-place form leaves self alone
    returned = torch_npu.npu_quant_scatter_(*npu_args)
    assert returned is npu_args[0] and torch.equal(npu_args[0].cpu(), want)


def test_inplace_quant_scatter_functionalizes():
    data, indices, updates, scales, _ = (t.npu() if t is not None else None for t in _inputs(1))

    def f(d, i, u, s):
        return torch.ops.npu.npu_quant_scatter_(d, i, u, s)

    graph = make_fx(torch.func.functionalize(f, remove="mutations_and_views"))(data.clone(), indices, updates, scales)
    targets = [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]
    assert "npu.npu_quant_scatter.default" in targets and "npu.npu_quant_scatter_.default" not in targets
    fresh = data.clone()
    graph(fresh, indices, updates, scales)
    assert torch.equal(fresh.cpu(), reference(data.cpu(), indices.cpu(), updates.cpu(), scales.cpu(), None))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"reduce": "add"}, "reduce must be 'update', got 'add'"),
        (
            {"quant_scales": torch.ones(3)},
            r"quant_scales must hold one scale per element of updates' axis -1 \(16\), got 3",
        ),
        ({"data": torch.zeros(3, 6, 16)}, "self must be int8, got torch.float32"),
    ],
)
def test_quant_scatter_errors(change, message):
    data, indices, updates, scales, _ = _inputs(2)
    args = {"data": data, "indices": indices, "updates": updates, "quant_scales": scales, "reduce": "update"}
    args.update(change)
    npu = {k: v.npu() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    with pytest.raises(RuntimeError, match=f"^npu_quant_scatter: {message}"):
        torch_npu.npu_quant_scatter(
            npu["data"], npu["indices"], npu["updates"], npu["quant_scales"], reduce=npu["reduce"]
        )


def test_quant_scatter_and_scatter_update_trace_without_reading_indices():
    # The fake kernels check shapes only: the slice positions are data, which a FakeTensor does not have, and
    # torch.compile(fullgraph=True) must not break the graph on them.
    data, indices, updates, scales, _ = (t.npu() if t is not None else None for t in _inputs(3))
    with torch._subclasses.FakeTensorMode() as mode:
        fake = [mode.from_tensor(t) for t in (data, indices, updates, scales)]
        out = torch.ops.npu.npu_quant_scatter(*fake)
        assert out.shape == data.shape and out.dtype == torch.int8 and out is not fake[0]
        assert torch.ops.npu.npu_quant_scatter_(*fake) is fake[0]
        assert torch.ops.npu.scatter_update(fake[0], fake[1], fake[0][:, :2], -2).shape == data.shape
        assert torch.ops.npu.scatter_update_(fake[0], fake[1], fake[0][:, :2], -2) is fake[0]

    compiled = torch.compile(
        lambda d, i, u, s: torch_npu.npu_quant_scatter(d, i, u, s), fullgraph=True, backend="eager"
    )
    want = reference(data.cpu(), indices.cpu(), updates.cpu(), scales.cpu(), None)
    assert torch.equal(compiled(data, indices, updates, scales).cpu(), want)
