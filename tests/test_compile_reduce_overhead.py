"""torch.compile(mode="reduce-overhead") on npu: inductor's code under the NPU graph trees, as torch_npu runs it
(warm-up, recording, replay in one pool per device; an output a later run overwrote raises; what cannot be
recorded runs without a graph and is counted as inductor counts cudagraph skips), with the results of the
same program compiled for the CPU, bit for bit."""

import copy
import gc

import pytest
import torch
from compile_models import MLP, DropoutMLP, replay_model_and_input, train

from torch_npu import _C
from torch_npu.npu import _graph_tree

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.fixture(autouse=True)
def fresh_trees():
    _graph_tree.reset_npugraph_trees()
    yield
    _graph_tree.reset_npugraph_trees()


def recorded_graphs():
    """(name of the compiled code, the NPU graph's tasks) of every node the device's tree recorded."""
    manager = _graph_tree.get_manager(0, create_if_none_exists=False)
    found, pending = [], list(manager.get_roots()) if manager is not None else []
    while pending:
        node = pending.pop()
        found.append((node.wrapped_function.model.name, node.graph._recording.describe()))
        pending.extend(child for children in node.children.values() for child in children)
    return sorted(found)


def skips():
    return torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]


def test_inference_is_recorded_once_and_replays_the_cpus_compiled_results():
    model, _ = replay_model_and_input()
    on_cpu = torch.compile(copy.deepcopy(model).cpu())
    compiled = torch.compile(model, mode="reduce-overhead")
    before = skips()
    with torch.no_grad():
        for step in range(5):  # warm-up, recording, replays
            x = torch.randn(4, 16, generator=torch.Generator().manual_seed(step))
            assert torch.equal(compiled(x.npu()).cpu(), on_cpu(x))
    assert recorded_graphs() == [("inductor forward graph", ["0 inductor forward graph()"])]
    assert skips() == before  # inductor's own check would have called the graph "multiple devices" and skipped it


@pytest.mark.parametrize("make", [MLP, DropoutMLP], ids=["mlp", "mlp_dropout"])
def test_training_records_forward_and_backward_and_matches_the_cpu_bit_for_bit(make):
    # with dropout: the recording's random draws stay drawn, so each replay draws what the CPU's next step draws
    losses, params = train(make, "npu", compile_kwargs={"mode": "reduce-overhead"}, steps=5)
    cpu_losses, cpu_params = train(make, "cpu", compile_kwargs={}, steps=5)
    assert losses == cpu_losses
    for a, b in zip(params, cpu_params, strict=True):
        assert torch.equal(a, b)
    assert [name for name, _ in recorded_graphs()] == ["inductor backward graph", "inductor forward graph"]


def test_an_output_a_later_run_overwrote_raises_as_with_cuda_graph_trees():
    @torch.compile(mode="reduce-overhead")
    def square(x):
        return x @ x

    x = torch.randn(10, 10, device="npu")
    first = square(x)
    square(x)
    with pytest.raises(RuntimeError, match="accessing tensor output of NPUGraphs that has been overwritten"):
        first.sum()


def test_a_graph_that_mutates_its_input_runs_without_a_graph_and_the_skip_is_counted():
    def f(x):
        x.add_(1)
        return x * 2

    compiled = torch.compile(f, mode="reduce-overhead")
    x, reference = torch.zeros(4, device="npu"), torch.zeros(4, device="npu")
    before = skips()
    with torch.no_grad():
        for _ in range(3):
            assert torch.equal(compiled(x), f(reference))
    assert x.tolist() == [3.0] * 4
    assert skips() == before + 1 and recorded_graphs() == []


@pytest.mark.parametrize("support_mutation", [True, False], ids=["checked-at-run", "checked-at-compile"])
def test_the_skip_is_reported_in_inductors_words(support_mutation):
    def f(x):
        x.add_(1)
        return x * 2

    compiled = torch.compile(f, mode="reduce-overhead")
    options = {"triton.cudagraph_or_error": True, "triton.cudagraph_support_input_mutation": support_mutation}
    with torch._inductor.config.patch(options), torch.no_grad():
        with pytest.raises(Exception, match=r"skipping cudagraphs due to mutated inputs \(1 instances\)"):
            for _ in range(3):
                compiled(torch.zeros(4, device="npu"))


def test_a_host_kernel_replays_on_the_tensors_it_named():
    graph = torch.npu.NPUGraph()
    source, target = torch.ones(3, device="npu"), torch.zeros(3, device="npu")
    with torch.npu.graph(graph):
        assert _C._graph_record_host_kernel(
            "double", lambda reads, writes: writes[0].copy_(reads[0] * 2), [source], [target]
        )
    assert target.tolist() == [0.0] * 3  # recording does not run the kernel: the caller ran it
    source.fill_(5)
    graph.replay()
    assert target.tolist() == [10.0] * 3
    assert graph._recording.describe() == ["0 double()"]


def test_without_trees_each_layout_replays_one_npu_graph():
    from torch_npu._inductor.graph_runner import NpuGraphRunner

    model, _ = replay_model_and_input()
    on_cpu = torch.compile(copy.deepcopy(model).cpu())
    with torch._inductor.config.patch({"triton.cudagraph_trees": False}), torch.no_grad():
        compiled = torch.compile(model, mode="reduce-overhead")
        for step in range(4):
            x = torch.randn(4, 16, generator=torch.Generator().manual_seed(step))
            assert torch.equal(compiled(x.npu()).cpu(), on_cpu(x))
    runners = [r for r in gc.get_objects() if type(r) is NpuGraphRunner and r.name == "inductor forward graph"]
    assert [len(r.recordings) for r in runners] == [1] and recorded_graphs() == []


def test_a_graph_on_another_device_is_recorded_in_that_devices_tree():
    model = torch.nn.Linear(8, 8).to("npu:1")
    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for step in range(4):
            x = torch.randn(2, 8, generator=torch.Generator().manual_seed(step)).to("npu:1")
            out = compiled(x)
            assert out.device == torch.device("npu:1") and torch.equal(out, model(x))
    assert _graph_tree.get_manager(1, create_if_none_exists=False) is not None
    assert _graph_tree.get_manager(0, create_if_none_exists=False) is None


def test_a_graph_with_a_cpu_tensor_runs_without_a_graph_as_inductor_skips_it():
    def scale(x, s):
        return x * s.to(x.device) + 1

    compiled = torch.compile(scale, mode="reduce-overhead")
    before = skips()
    with torch.no_grad():
        for step in range(3):
            x, s = torch.randn(4, device="npu"), torch.tensor(float(step))
            assert torch.equal(compiled(x, s), scale(x, s))
    assert skips() == before + 1 and recorded_graphs() == []
    torch._dynamo.reset()
    with torch._inductor.config.patch({"triton.cudagraph_or_error": True}), torch.no_grad():
        with pytest.raises(Exception, match=r"skipping cudagraphs due to cpu device \(arg\d_1\)\. Found from"):
            torch.compile(scale, mode="reduce-overhead")(torch.ones(4, device="npu"), torch.tensor(2.0))
