"""torch_npu.utils._graph_tree: the decisions of backend="npugraphs" under torch_npu's names. Programs replace
check_for_skip there or set npugraph_trees.disable_cpu_input_check, and the backend follows; npugraphify and
npugraphify_impl graph a boxed function themselves."""

import pytest
import torch
from compile_models import MLP, train

from torch_npu._inductor import config as npu_config
from torch_npu._inductor.graph_runner import NpuGraphRunner
from torch_npu.npu import _graph_tree as npu_graph_tree
from torch_npu.utils import _graph_tree

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def skips():
    return torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]


@pytest.fixture
def cpu_inputs_allowed():
    asserts = torch._inductor.config.triton.slow_path_cudagraph_asserts
    npu_config.npugraph_trees.disable_cpu_input_check = True
    yield
    npu_config.npugraph_trees.disable_cpu_input_check = False
    torch._inductor.config.triton.slow_path_cudagraph_asserts = asserts


def runner_wrapping(fn):
    """The NpuGraphRunner inside an align_inputs_from_check_idxs wrapper (or the runner itself)."""
    for cell in getattr(fn, "__closure__", None) or ():
        if isinstance(cell.cell_contents, NpuGraphRunner):
            return cell.cell_contents
    assert isinstance(fn, NpuGraphRunner)
    return fn


def test_a_replaced_check_for_skip_decides_for_training_and_inference(monkeypatch):
    seen = []

    def skip_all(graph_module, num_fixed):
        seen.append((len(graph_module.graph.find_nodes(op="placeholder")), num_fixed))
        return "skipping cudagraphs due to the program's policy"

    monkeypatch.setattr(_graph_tree, "check_for_skip", skip_all)
    before = skips()
    compiled = train(MLP, "npu", compile_kwargs={"backend": "npugraphs"}, steps=3)
    eager = train(MLP, "npu", steps=3)
    assert compiled[0] == eager[0]
    for a, b in zip(compiled[1], eager[1], strict=True):
        assert torch.equal(a, b)
    assert len(seen) == 1  # the forward is asked; its backward runs without a graph, unasked
    model = torch.nn.Linear(4, 4).npu()
    with torch.no_grad():
        out = torch.compile(model, backend="npugraphs")(torch.ones(2, 4, device="npu"))
    assert torch.equal(out, model(torch.ones(2, 4, device="npu")))
    assert len(seen) == 2  # inference too: through AOT autograd, as torch_npu compiles it
    assert skips() == before + 2


def test_the_default_check_for_skip_lets_a_pure_npu_graph_be_captured(monkeypatch):
    made = []

    def recording_runner(*args, **kwargs):
        made.append(NpuGraphRunner(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr("torch_npu._inductor.graph_runner.NpuGraphRunner", recording_runner)
    before = skips()
    train(MLP, "npu", compile_kwargs={"backend": "npugraphs"}, steps=3)
    assert skips() == before
    assert sorted(r.name for r in made if r.recordings) == ["npugraphs backward graph", "npugraphs forward graph"]


def test_a_skipped_forward_takes_its_backward_with_it(monkeypatch):
    asked = []

    def recording_check(gm, fixed):
        reason = _graph_tree.DEFINED_CHECK_FOR_SKIP(gm, fixed)
        asked.append(reason)
        return reason

    monkeypatch.setattr(_graph_tree, "check_for_skip", recording_check)
    compiled = torch.compile(lambda x, n: (x * n.to("npu")).sum(), backend="npugraphs")
    x, n = torch.ones(3, device="npu", requires_grad=True), torch.full((3,), 2.0)
    before = skips()
    for _ in range(3):
        compiled(x, n).backward()
    assert x.grad.tolist() == [6.0] * 3
    assert len(asked) == 1 and asked[0].startswith("skipping cudagraphs due to cpu device (")
    assert skips() == before + 1


def test_check_for_skip_names_the_cpu_tensor_unless_cpu_inputs_are_allowed(cpu_inputs_allowed):
    graph = torch.fx.Graph()
    a = graph.placeholder("a")
    graph.output(a)
    a.meta["val"] = torch.empty(2)
    mapping = {torch.device("cpu"): a, torch.device("npu", 0): a}
    assert _graph_tree.check_multiple_devices_or_any_cpu_nodes(dict(mapping)) is None
    assert torch._inductor.config.triton.slow_path_cudagraph_asserts is False
    npu_config.npugraph_trees.disable_cpu_input_check = False
    assert (
        _graph_tree.check_multiple_devices_or_any_cpu_nodes(dict(mapping))
        == "skipping cudagraphs due to cpu device (a)"
    )
    two = {torch.device("npu", 0): a, torch.device("npu", 1): a}
    assert _graph_tree.check_multiple_devices_or_any_cpu_nodes(two) == (
        "skipping cudagraphs due to multiple devices: device(type='npu', index=0), device(type='npu', index=1)"
    )


def test_cpu_inputs_allowed_lets_a_graph_that_reads_a_cpu_tensor_be_captured(cpu_inputs_allowed):
    before = skips()
    f = lambda x, idx, n: (x[idx] * n.to("npu")).sum() + x.sum()  # noqa: E731
    compiled = torch.compile(f, backend="npugraphs")
    x = torch.arange(6.0, device="npu", requires_grad=True)
    for i in range(5):  # warm-up, capture, replays: each replay reads the CPU tensors it is given
        idx, n = torch.tensor([i, (i + 1) % 6]), torch.full((2,), float(i + 2))
        assert compiled(x, idx, n).item() == f(x, idx, n).item()
    assert skips() == before


def test_a_cpu_scalar_input_is_never_frozen_into_a_replay(cpu_inputs_allowed):
    f = lambda x, scale: x * scale  # noqa: E731 - a Python float reaches the graph as a 0-dim CPU tensor
    compiled = torch.compile(f, backend="npugraphs")
    x = torch.ones(3, device="npu", requires_grad=True)
    before = skips()
    for scale in (2.0, 3.0, 4.0, 5.0):
        assert compiled(x, scale).tolist() == [scale] * 3
    assert skips() == before + 1
    gm = torch.fx.symbolic_trace(lambda x, s: x * s)  # the reason check_for_skip gives
    x_node, s_node = gm.graph.find_nodes(op="placeholder")
    x_node.meta["val"], s_node.meta["val"] = torch.empty(3, device="npu"), torch.empty(())
    assert _graph_tree.check_for_skip(gm, 0) == (
        "skipping cudagraphs due to cpu scalar input (s): its value is read when the graph is captured, so a replay "
        "would keep the first value"
    )


def test_get_device_index_refuses_a_graph_without_npu_tensors():
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    next(iter(gm.graph.nodes)).meta["val"] = torch.empty(2)
    with pytest.raises(RuntimeError, match=r"^check device.type == npu fail$"):
        _graph_tree.get_device_index(gm)
    next(iter(gm.graph.nodes)).meta["val"] = torch.empty(2, device="npu:1")
    assert _graph_tree.get_device_index(gm) == 1


def boxed_double_plus(inputs):
    x, y = inputs
    inputs.clear()
    return (x * 2 + y,)


def test_npugraphify_impl_records_now_and_replays_into_its_output_buffer():
    x, y = torch.randn(4, device="npu"), torch.randn(4, device="npu")
    run = _graph_tree.npugraphify_impl(boxed_double_plus, [x, y], static_input_idxs=(1,))
    runner = runner_wrapping(run)
    assert len(runner.recordings) == 1
    new_x = torch.randn(4, device="npu")
    (first,) = run([new_x, y])
    assert torch.equal(first, new_x * 2 + y)
    (second,) = run([x, y])
    assert second.data_ptr() == first.data_ptr() and torch.equal(second, x * 2 + y)
    with pytest.raises(RuntimeError, match=r"^check isinstance\(inputs, list\) fail$"):
        _graph_tree.npugraphify_impl(boxed_double_plus, (x, y))


@pytest.mark.parametrize("trees", [True, False], ids=["trees", "one graph"])
def test_npugraphify_graphs_on_first_call(trees):
    npu_graph_tree.reset_npugraph_trees()
    with torch._inductor.config.patch({"triton.cudagraph_trees": trees}):
        run = _graph_tree.npugraphify(
            boxed_double_plus, (), device_index=0, stack_traces=[None], is_backward=False, is_inference=True
        )
        for _ in range(3):
            x, y = torch.randn(4, device="npu"), torch.randn(4, device="npu")
            (out,) = run([x, y])
            assert torch.equal(out, x * 2 + y)
    npu_graph_tree.reset_npugraph_trees()


def test_npugraphs_backend_object_compiles_and_resets():
    backend = _graph_tree.NpugraphsBackend()
    assert backend.compiler_name == "npugraphs"
    model = torch.nn.Linear(4, 2).npu()
    compiled = torch.compile(model, backend=backend)
    x = torch.randn(3, 4, device="npu")
    for _ in range(3):
        assert torch.equal(compiled(x), model(x))
    npu_graph_tree.get_container(0)
    backend.reset()
    assert not getattr(npu_graph_tree.local, "tree_manager_containers", {})


def test_reduce_overhead_honours_cpu_inputs_allowed(cpu_inputs_allowed):
    npu_graph_tree.reset_npugraph_trees()
    before = skips()
    f = lambda x, idx, n: (x[idx] * n.to("npu")).sum() + x.sum()  # noqa: E731
    compiled = torch.compile(f, mode="reduce-overhead")
    x = torch.arange(6.0, device="npu")
    for i in range(5):
        idx, n = torch.tensor([i, (i + 1) % 6]), torch.full((2,), float(i + 2))
        assert compiled(x, idx, n).item() == f(x, idx, n).item()
    assert skips() == before and npu_graph_tree.get_manager(0, create_if_none_exists=False) is not None  # recorded
    scaled = torch.compile(lambda x, s: x * s, mode="reduce-overhead")
    for s in (2.0, 3.0, 4.0, 5.0):
        assert scaled(x, s).tolist() == (x * s).tolist()
    assert skips() == before + 1
