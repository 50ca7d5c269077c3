"""torch.compile with NPU graph replay by the graph backends: backend="npugraphs" (the ATen graphs captured and
replayed) with CUDA graphs' rules: warm-up, capture, replay, one graph per input shape, outputs overwritten by
the next replay, skips reported. (npugraph_ex shares the replay; its options are tested in
test_compile_npugraph_ex.py; mode="reduce-overhead" runs under the NPU graph trees: test_compile_reduce_overhead.py.)"""

import gc

import pytest
import torch
from compile_models import MLP, replay_model_and_input, train

from torch_npu._inductor.graph_runner import NpuGraphRunner

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def runners(prefix=""):
    """The graph runners alive (of this test: the names say which backend made them). Earlier tests' runners left
    in reference cycles are collected first, so that they are not counted as this test's."""
    gc.collect()
    found = []
    for obj in gc.get_objects():
        try:
            if type(obj) is NpuGraphRunner and obj.name.startswith(prefix):
                found.append(obj)
        except ReferenceError:
            pass
    return found


@pytest.mark.parametrize(
    "kwargs", [{"backend": "npugraphs"}, {"backend": "npugraph_ex"}], ids=["npugraphs", "npugraph_ex"]
)
def test_inference_warms_up_captures_then_replays(kwargs):
    model, x = replay_model_and_input()
    compiled = torch.compile(model, **kwargs)
    with torch.no_grad():
        expected = model(x)
        first = compiled(x)  # warm-up
        second = compiled(x).clone()  # capture (the graph's output buffer: the next replay overwrites it)
        (runner,) = [r for r in runners(kwargs["backend"]) if r.recordings]
        recording = next(iter(runner.recordings.values()))
        new_x = torch.randn(4, 16, device="npu")
        third = compiled(new_x)  # replay
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(second, expected)
    torch.testing.assert_close(third, model(new_x))
    assert third.data_ptr() == recording.outputs[0].data_ptr()  # the graph's output buffer
    assert recording.graph._recording.size() > 0


def test_replay_overwrites_the_previous_output_as_cuda_graphs_do():
    model, x = replay_model_and_input()
    compiled = torch.compile(model, backend="npugraphs")
    with torch.no_grad():
        for _ in range(2):
            compiled(x)
        a = compiled(x)
        kept = a.clone()
        b = compiled(x + 1)
    assert a.data_ptr() == b.data_ptr() and torch.equal(a, b) and not torch.equal(a, kept)


def test_each_new_shape_is_captured_once():
    model, _ = replay_model_and_input()
    compiled = torch.compile(model, backend="npugraphs", dynamic=False)
    with torch.no_grad():
        for batch in (2, 3, 2, 3, 2, 3):
            x = torch.randn(batch, 16, device="npu")
            torch.testing.assert_close(compiled(x), model(x))
    recorded = sum(len(r.recordings) for r in runners("npugraphs"))
    assert recorded == 2


def test_training_replays_forward_and_backward():
    compiled = train(MLP, "npu", compile_kwargs={"backend": "npugraphs"}, steps=5)
    eager = train(MLP, "npu", steps=5)
    assert compiled[0] == pytest.approx(eager[0], rel=1e-4, abs=1e-4)
    for a, b in zip(compiled[1], eager[1], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    kinds = sorted(r.name.split()[-2] for r in runners("npugraphs") if r.recordings)
    assert kinds == ["backward", "forward"]


def test_a_graph_that_cannot_be_captured_runs_without_one_and_says_why():
    def f(x):
        return torch.nonzero(x > 0)  # an output whose size the host must read: refused while capturing

    x = torch.tensor([1.0, -1.0, 2.0], device="npu")
    counters = torch._dynamo.utils.counters
    before = counters["inductor"]["cudagraph_skips"]
    existing = {id(r) for r in runners()}
    compiled = torch.compile(f, backend="npugraphs")
    with torch.no_grad(), torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):  # nonzero in the graph
        for _ in range(3):
            assert compiled(x).flatten().tolist() == [0, 2]
    (runner,) = [r for r in runners("npugraphs") if id(r) not in existing]
    assert "not permitted when stream is capturing" in runner.skip_reason and not runner.recordings
    assert counters["inductor"]["cudagraph_skips"] == before + 1


def test_inputs_on_the_cpu_are_not_captured():
    counters = torch._dynamo.utils.counters
    before = counters["inductor"]["cudagraph_skips"]
    compiled = torch.compile(lambda a, b: a + b.to("npu"), backend="npugraphs")
    a, b = torch.ones(3, device="npu"), torch.ones(3)
    with torch.no_grad():
        for _ in range(3):
            assert compiled(a, b).tolist() == [2.0, 2.0, 2.0]
    assert counters["inductor"]["cudagraph_skips"] > before


def test_npugraphs_inference_replays_dynamos_graph_bit_for_bit():
    model, x = replay_model_and_input()
    existing = {id(r) for r in runners()}
    compiled = torch.compile(model, backend="npugraphs")
    with torch.no_grad():
        expected = model(x)
        results = [compiled(x).clone() for _ in range(4)]  # warm-up, capture, two replays
    names = sorted(r.name for r in runners("npugraphs") if r.recordings and id(r) not in existing)
    assert names == ["npugraphs dynamo graph"]  # no AOT autograd wrapper around an inference replay
    for result in results:
        assert torch.equal(result, expected)


def _add_in_place(x):
    x.add_(1)
    return x * 2


def _augmented_add(x):
    x += 1
    return x * 2


@pytest.mark.parametrize("f", [_add_in_place, _augmented_add], ids=["add_", "+="])
def test_npugraphs_inference_that_mutates_its_input_keeps_eager_semantics(f):
    existing = {id(r) for r in runners()}
    compiled = torch.compile(f, backend="npugraphs")
    x, reference = torch.zeros(4, device="npu"), torch.zeros(4, device="npu")
    with torch.no_grad():
        for _ in range(4):
            assert torch.equal(compiled(x), f(reference))
    assert x.tolist() == reference.tolist() == [4.0] * 4
    made = [r.name for r in runners("npugraphs") if id(r) not in existing]
    assert made and "npugraphs dynamo graph" not in made  # AOT autograd's functionalization handles it


def test_npugraphs_inference_returns_views_of_the_callers_inputs():
    compiled = torch.compile(lambda x: (x.t(), x + 1), backend="npugraphs")
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(3, 4, device="npu")
            view, plus = compiled(x)
            assert view.data_ptr() == x.data_ptr() and torch.equal(view, x.t())
            assert torch.equal(plus, x + 1)


def test_npugraphs_inference_with_dynamic_shapes_and_autocast_matches_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 8)
    ).npu()
    compiled = torch.compile(model.eval(), backend="npugraphs", dynamic=True)
    with torch.no_grad():
        for batch in (2, 3, 5, 2, 3, 5):
            x = torch.randn(batch, 16, device="npu")
            assert torch.equal(compiled(x), model(x))
        with torch.autocast("npu", dtype=torch.bfloat16):
            for _ in range(3):
                x = torch.randn(4, 16, device="npu")
                result, expected = compiled(x), model(x)
                assert result.dtype == torch.bfloat16 and torch.equal(result, expected)
