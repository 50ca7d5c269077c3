"""npu's in-place operators under functionalization (torch.func.functionalize, torch.compile): the graph holds
the out-of-place operator and one copy_ back into the input, and computes what the eager in-place call does."""

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import torch_npu


def _cases():
    g = torch.Generator().manual_seed(0)
    group_x, group_w = torch.randn(5, 4, generator=g).half(), torch.randn(5, 3, generator=g).half()
    return [
        (
            "npu_scatter_nd_update_",
            lambda t, i, u: torch_npu.npu_scatter_nd_update_(t, i, u),
            (torch.randn(6, 8, generator=g), torch.tensor([[1], [4]], dtype=torch.int32), torch.ones(2, 8)),
            "npu_scatter_nd_update",
        ),
        (
            "scatter_update_",
            lambda t, i, u: torch.ops.npu.scatter_update_(t, i, u, -2),
            (torch.randn(4, 2, 6, 8, generator=g), torch.tensor([1, 0, 5, 2]), torch.randn(4, 2, 1, 8, generator=g)),
            "scatter_update",
        ),
        ("npu_silu_", lambda t: torch_npu.npu_silu_(t), (torch.randn(3, 5, generator=g),), "npu_silu"),
        (
            "npu_grouped_matmul_add_",
            lambda y, x, w, groups: torch_npu.npu_grouped_matmul_add_(y, x, w, groups),
            (torch.zeros(2, 4, 3), group_x, group_w, torch.tensor([2, 5])),
            "npu_grouped_matmul_add",
        ),
    ]


@pytest.mark.parametrize("name, call, args, functional", _cases(), ids=[c[0] for c in _cases()])
def test_inplace_operator_functionalizes_to_its_functional_form(name, call, args, functional):
    eager = [a.npu() for a in args]
    call(*eager)
    traced_inputs = [a.npu() for a in args]
    graph = make_fx(torch.func.functionalize(call, remove="mutations_and_views"))(*traced_inputs)
    targets = [str(node.target) for node in graph.graph.nodes if node.op == "call_function"]
    assert f"npu.{functional}.default" in targets
    assert f"npu.{name}.default" not in targets
    assert targets[-1] == "aten.copy_.default"
    fresh = [a.npu() for a in args]
    graph(*fresh)
    assert torch.equal(fresh[0].cpu(), eager[0].cpu())


def test_compiled_inplace_operator_updates_its_input():
    def step(x):
        torch_npu.npu_silu_(x)
        return x * 2

    x = torch.randn(4, 4).npu()
    y = x.clone()
    want = step(x)
    got = torch.compile(step, backend="aot_eager", fullgraph=True)(y)
    assert torch.equal(got.cpu(), want.cpu()) and torch.equal(y.cpu(), x.cpu())
