"""torch.cond inside NPU graphs (torch_npu.npu._npugraph_conditional_nodes): captured under
NPUGraphCaptureControlFlowOpDispatchMode it becomes a conditional node, and each replay computes the branch the
predicate selects then, bit for bit as eager (nested conditions, several outputs, branches that allocate, the
gradients of a module); random operators inside a branch are refused."""

import pytest
import torch
from error_cases import raises_exactly

from torch_npu.npu._npugraph_conditional_nodes import NPUGraphCaptureControlFlowOpDispatchMode


def _npu_bool(value):
    return torch.tensor(value, device="npu")


def _capture(fn, *args):
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, stream=torch.npu.Stream()), NPUGraphCaptureControlFlowOpDispatchMode():
        out = fn(*args)
    return g, out


def _sin_or_cos(x, pred):
    return torch.cond(pred, lambda t: t.sin(), lambda t: t.cos(), (x,))


def test_each_replay_computes_the_branch_the_predicate_selects_then():
    x = torch.randn(4, 3, device="npu")
    pred = _npu_bool(True)
    g, out = _capture(_sin_or_cos, x, pred)
    for value in (True, False, True):
        pred.fill_(value)
        x.add_(0.5)
        g.replay()
        expected = x.cpu().sin() if value else x.cpu().cos()
        assert torch.equal(out.cpu(), expected)


def test_nested_conditions_pick_their_branches_at_replay():
    def fn(x, outer, inner):
        def then(t, q):
            return torch.cond(q, lambda u: u + 1, lambda u: u - 1, (t,))

        return torch.cond(outer, then, lambda t, q: t * 2, (x, inner))

    x = torch.randn(5, device="npu")
    outer, inner = _npu_bool(True), _npu_bool(False)
    g, out = _capture(fn, x, outer, inner)
    for o, i, expected in ((True, False, x - 1), (True, True, x + 1), (False, True, x * 2)):
        outer.fill_(o)
        inner.fill_(i)
        g.replay()
        assert torch.equal(out, expected)


def test_branches_with_several_outputs_and_their_own_allocations():
    def branch(op):
        def run(t):
            a, b = torch.empty_like(t), torch.empty_like(t)
            a.copy_(op(t))
            b.copy_(t * 3)
            return a, b

        return run

    def fn(x, pred):
        a, b = torch.cond(pred, branch(torch.exp), branch(torch.neg), (x,))
        return a + b

    x = torch.randn(2, 6, device="npu")
    pred = _npu_bool(False)
    g, out = _capture(fn, x, pred)
    for value in (True, False):
        pred.fill_(value)
        g.replay()
        cpu = x.cpu()
        assert torch.equal(out.cpu(), (cpu.exp() if value else cpu.neg()) + cpu * 3)


class CondLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.yes = torch.nn.Linear(4, 4)
        self.no = torch.nn.Linear(4, 4)

    def forward(self, x, pred):
        return torch.cond(pred, lambda t: self.yes(t).sin(), lambda t: self.no(t).cos(), (x,))


@pytest.mark.parametrize("value", [True, False])
def test_a_module_captured_with_a_condition_has_eager_outputs_and_gradients(value):
    torch.manual_seed(0)
    model = CondLinear().npu()
    x = torch.randn(3, 4, device="npu")
    pred = _npu_bool(value)

    eager_x = x.clone().requires_grad_(True)
    eager_out = model(eager_x, pred)
    eager_out.sum().backward()
    eager_grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]

    model.zero_grad(set_to_none=True)
    graph_x = x.clone().requires_grad_(True)
    g, graph_out = _capture(model, graph_x, pred)
    g.replay()
    graph_out.sum().backward()
    assert torch.equal(graph_out, eager_out)
    assert torch.equal(graph_x.grad, eager_x.grad)
    for eager, captured in zip(eager_grads, (p.grad for p in model.parameters()), strict=True):
        assert (eager is None and captured is None) or torch.equal(eager, captured)


def test_random_operators_inside_a_branch_are_refused_and_outside_allowed():
    x = torch.ones(4, device="npu")
    raises_exactly(
        lambda: _capture(
            lambda t, p: torch.cond(p, lambda u: u + torch.randn_like(u), lambda u: u * 2, (t,)), x, _npu_bool(True)
        ),
        RuntimeError,
        "RNG within data-dependent conditional nodes is not supported yet",
    )
    g, out = _capture(lambda t, p: _sin_or_cos(t, p) + torch.randn_like(t), x, _npu_bool(True))
    g.replay()
    assert out.shape == x.shape and not torch.equal(out, x.sin())


def test_a_predicate_off_the_device_is_refused_and_eager_cond_is_unchanged():
    x = torch.randn(3, device="npu")
    with pytest.raises(ValueError, match="^Conditions must be on an npu device to use conditional node in npu graphs$"):
        _capture(_sin_or_cos, x, torch.tensor(True))
    with NPUGraphCaptureControlFlowOpDispatchMode():  # no capture: torch.cond as usual
        assert torch.equal(_sin_or_cos(x, _npu_bool(False)), x.cos())
