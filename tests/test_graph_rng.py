"""Random numbers in captured NPU graphs as torch_npu's graph-safe generators give them: capturing leaves the
generators where they were, replays draw from the state they find and advance it, get/set_rng_state inside a
capture return the replay to a marked point, and a seed change during capture is refused."""

import pytest
import torch

import torch_npu
from torch_npu.npu._graph_rng import SEED_CHANGE_ERROR


def _capture(fn, graph=None):
    graph = graph or torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        out = fn()
    return graph, out


def test_capture_leaves_the_generator_and_each_replay_draws_the_next_numbers():
    torch.npu.manual_seed(1234)
    first, second, third = (torch.randn(16, device="npu") for _ in range(3))
    torch.npu.manual_seed(1234)
    buf = torch.empty(16, device="npu")
    g0, _ = _capture(lambda: buf.copy_(torch.randn_like(buf)))
    other = torch.empty(16, device="npu")
    g1, _ = _capture(lambda: other.copy_(torch.randn_like(other)))
    g0.replay()
    assert torch.equal(buf.cpu(), first.cpu())
    g1.replay()
    assert torch.equal(other.cpu(), second.cpu())
    assert torch.equal(torch.randn(16, device="npu").cpu(), third.cpu())  # replays advanced the generator


def test_get_and_set_rng_state_inside_a_capture_repeat_the_draws_on_replay():
    torch_npu.npu.manual_seed(123)
    ahead = torch.rand(8, device="npu")
    state = torch_npu.npu.get_rng_state()
    eager = torch.rand(8, device="npu")
    torch_npu.npu.set_rng_state(state)
    eager_again, eager_next = torch.rand(8, device="npu"), torch.rand(8, device="npu")
    assert torch.equal(eager, eager_again)

    def body():
        before = torch.rand(8, device="npu")
        marked = torch_npu.npu.get_rng_state()
        first = torch.rand(8, device="npu")
        torch_npu.npu.set_rng_state(marked)
        return before, first, torch.rand(8, device="npu")

    torch_npu.npu.manual_seed(123)
    graph, (before, first, repeated) = _capture(body)
    torch_npu.npu.manual_seed(123)
    graph.replay()
    assert torch.equal(before.cpu(), ahead.cpu())
    assert torch.equal(first.cpu(), eager.cpu()) and torch.equal(repeated.cpu(), eager.cpu())
    assert torch.equal(torch.rand(8, device="npu").cpu(), eager_next.cpu())


def test_checkpoint_with_preserved_rng_state_in_a_graph_gives_eagers_gradient():
    def fn(x):
        return x * torch.sigmoid(torch.randn(1, device="npu"))

    def grad_of_checkpoint():
        x = torch.ones(1, device="npu", requires_grad=True)
        out = torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False, preserve_rng_state=True)
        return torch.autograd.grad(out, x)[0]

    torch.npu.manual_seed(42)
    eager = grad_of_checkpoint()
    graph, captured = _capture(grad_of_checkpoint)
    torch.npu.manual_seed(42)
    graph.replay()
    assert torch.equal(captured.cpu(), eager.cpu())


def test_a_registered_generator_is_graph_safe_too():
    generator = torch.Generator(device="npu")
    generator.manual_seed(0)
    before = generator.get_state()
    graph = torch.npu.NPUGraph()
    graph.register_generator_state(generator)
    graph, out = _capture(lambda: torch.rand(8, device="npu", generator=generator), graph)
    assert torch.equal(generator.get_state(), before)  # the capture did not advance it
    reference = torch.Generator(device="npu")
    reference.manual_seed(0)
    want = torch.rand(8, device="npu", generator=reference)
    graph.replay()
    assert torch.equal(out.cpu(), want.cpu())


@pytest.mark.parametrize(
    "change",
    [lambda other: torch_npu.npu.set_rng_state(other), lambda other: torch.npu.manual_seed(1)],
    ids=["set_rng_state", "manual_seed"],
)
def test_a_seed_change_during_capture_is_refused(change):
    torch_npu.npu.manual_seed(1)
    other = torch_npu.npu.get_rng_state()
    torch_npu.npu.manual_seed(0)
    with pytest.raises(RuntimeError) as info:
        _capture(lambda: change(other))
    assert str(info.value) == SEED_CHANGE_ERROR
    assert torch_npu.npu.initial_seed() == 0
