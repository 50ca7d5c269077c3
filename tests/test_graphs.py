"""NPU graphs: capture records the operators of the capturing stream, replay re-runs them on the same
memory (same results as eager), host synchronisation is refused during capture."""

import pytest
import torch
import torch.nn as nn
from error_cases import graph_in_capture, hooked_linear, raises_exactly, t

import torch_npu


def _capture(fn, *static_inputs, pool=None):
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, pool=pool):
        out = fn(*static_inputs)
    return g, out


def test_replay_reads_current_inputs_and_equals_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)).npu().eval()
    x = torch.randn(8, 16, device="npu")
    with torch.no_grad():
        g, y = _capture(model, x)
        for _ in range(3):
            new = torch.randn(8, 16, device="npu")
            x.copy_(new)
            g.replay()
            assert torch.equal(y.cpu(), model(new).cpu())
            assert torch.equal(y.cpu(), model.cpu()(new.cpu()))
            model.npu()


def test_capture_runs_the_work_once_and_replay_appends_in_place():
    x = torch.zeros(3, device="npu")
    g, _ = _capture(lambda t: t.add_(1), x)
    assert torch.equal(x.cpu(), torch.ones(3))
    g.replay()
    g.replay()
    assert torch.equal(x.cpu(), torch.full((3,), 3.0))


def test_capture_on_default_stream_is_refused():
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="non-default stream"):
        g.capture_begin()


PINNED_EXPANDABLE_REFUSAL = (
    "ACLGraph capture is not supported when pin_memory_expandable_segments=True. NPUExpandableHostAllocatorImpl "
    "overrides allocate/free/empty_cache/record_event and does not integrate with the base CachingHostAllocator's "
    "private pool mechanism, which would cause capture-time pinned blocks to be incorrectly recycled and lead to data "
    "corruption on graph replay. Please unset pin_memory_expandable_segments in PYTORCH_NPU_ALLOC_CONF to use "
    "ACLGraph with pin_memory, or avoid pin_memory calls inside capture regions."
)


def test_capture_with_pinned_memory_from_expandable_segments_is_refused_on_the_callers_stream():
    side, before = torch.npu.Stream(), torch.npu.current_stream()
    torch_npu.npu.memory._set_allocator_settings("pin_memory_expandable_segments:True")
    try:
        with pytest.raises(RuntimeError) as info:
            with torch.npu.graph(torch.npu.NPUGraph(), stream=side):
                pass
    finally:
        torch_npu.npu.memory._set_allocator_settings("pin_memory_expandable_segments:False")
    assert str(info.value).split("\n")[0] == PINNED_EXPANDABLE_REFUSAL and "ERR00007" in str(info.value)
    assert torch.npu.current_stream() == before and not torch.npu.is_current_stream_capturing()
    g = torch.npu.NPUGraph()  # unset, captures go on
    with torch.npu.graph(g, stream=side):
        out = torch.full((4,), 2.0).pin_memory().npu(non_blocking=True) * 3
    g.replay()
    assert out.tolist() == [6.0] * 4


def test_host_memory_pinned_during_a_capture_stays_in_the_graphs_pool():
    g, dst = torch.npu.NPUGraph(), torch.zeros(64, device="npu")
    with torch.npu.graph(g):
        pinned = torch.full((64,), 7.0).pin_memory()
        dst.copy_(pinned, non_blocking=True)
    address = pinned.data_ptr()
    del pinned
    before = torch_npu.npu.host_memory_stats()["allocations.current"]
    torch_npu.npu.host_empty_cache()  # drains the default pool only
    assert torch_npu.npu.host_memory_stats()["allocations.current"] == before
    later = [torch.full((64,), -1.0).pin_memory() for _ in range(8)]
    assert address not in {t.data_ptr() for t in later}
    dst.zero_()
    g.replay()
    assert dst.tolist() == [7.0] * 64


def test_capture_under_task_queue_mode_2_is_refused():
    from subprocess_helpers import run_python

    proc = run_python(
        """
        import torch, torch_npu
        try:
            with torch.npu.graph(torch.npu.NPUGraph()):
                pass
        except RuntimeError as error:
            print(str(error).splitlines()[0])
            print("ERR00007" in str(error), torch.npu.current_stream() == torch.npu.default_stream())
        """,
        env={"TASK_QUEUE_ENABLE": "2"},
    )
    assert proc.stdout.splitlines() == [
        "Do not support TASK_QUEUE_ENABLE = 2 during NPU graph capture, please export TASK_QUEUE_ENABLE=1/0.",
        "True True",
    ]


def test_a_graph_captures_once_until_reset_and_its_pool_needs_a_capture():
    g, side = torch.npu.NPUGraph(), torch.npu.Stream()
    raises_exactly(g.pool, RuntimeError, "Called NPUGraph::pool() without a preceding successful capture.")
    with torch.npu.graph(g, stream=side):
        first = torch.ones(3, device="npu") * 2
    pool = g.pool()
    with pytest.raises(RuntimeError) as info:
        with torch.npu.graph(g, stream=side):
            pass
    assert str(info.value) == (
        "This NPUGraph instance already owns a captured graph. To capture a new graph, create a new instance."
    )
    assert torch.npu.current_stream() == torch.npu.default_stream() and g.pool() == pool
    first.zero_()
    g.replay()
    assert first.tolist() == [2.0] * 3  # the first capture is intact
    g.reset()
    raises_exactly(g.pool, RuntimeError, "Called NPUGraph::pool() without a preceding successful capture.")
    with torch.npu.graph(g, stream=side):
        second = torch.ones(3, device="npu") * 5
    second.zero_()
    g.replay()
    assert second.tolist() == [5.0] * 3


def test_is_current_stream_capturing():
    seen = []
    g = torch.npu.NPUGraph()
    assert torch.npu.is_current_stream_capturing() is False
    with torch.npu.graph(g):
        seen.append(torch.npu.is_current_stream_capturing())
        torch.ones(1, device="npu")
    assert seen == [True]
    assert torch.npu.is_current_stream_capturing() is False


@pytest.mark.parametrize(
    "sync",
    [
        lambda t: t.sum().item(),
        lambda t: t.cpu(),
        lambda t: torch.npu.synchronize(),
        lambda t: torch.npu.current_stream().synchronize(),
        lambda t: torch.npu.current_stream().query(),
        lambda t: t.tolist(),
    ],
)
def test_host_synchronisation_during_capture_is_refused(sync):
    x = torch.ones(4, device="npu")
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="operation not permitted when stream is capturing"):
        with torch.npu.graph(g):
            y = x * 2
            sync(y)
    # the failed capture leaves no capturing state behind
    assert torch.npu.is_current_stream_capturing() is False
    assert float((x * 2).sum().item()) == 8.0


def test_event_synchronize_during_capture_is_refused():
    g = torch.npu.NPUGraph()
    event = torch.npu.Event()
    event.record()
    with pytest.raises(RuntimeError, match="operation not permitted when stream is capturing"):
        with torch.npu.graph(g):
            event.synchronize()


def test_graphs_share_a_memory_pool():
    pool = torch.npu.graph_pool_handle()
    x = torch.ones(64, device="npu")
    g1, y1 = _capture(lambda t: t * 2, x, pool=pool)
    g2, y2 = _capture(lambda t: t + 3, y1, pool=pool)
    assert g1.pool() == g2.pool() == pool
    x.fill_(5)
    g1.replay()
    g2.replay()
    assert torch.equal(y2.cpu(), torch.full((64,), 13.0))


def test_reset_and_debug_dump(tmp_path):
    x = torch.ones(2, device="npu")
    g, _ = _capture(lambda t: (t * 2).sum(), x)
    path = tmp_path / "graph.txt"
    g.debug_dump(str(path))
    text = path.read_text()
    assert "aten::mul" in text and "aten::sum" in text
    g.reset()
    with pytest.raises(RuntimeError, match=r"^Called NPUGraph::replay without a preceding successful capture\.$"):
        g.replay()  # nothing left to run: torch_npu refuses
    assert torch.equal(x.cpu(), torch.ones(2))
    with pytest.warns(UserWarning, match=r"^Called NPUGraph::debug_dump without a preceding successful capture\.$"):
        g.debug_dump(str(tmp_path / "after_reset.txt"))
    assert not (tmp_path / "after_reset.txt").exists()


def test_replay_without_capture_raises():
    with pytest.raises(RuntimeError, match=r"^Called NPUGraph::replay without a preceding successful capture\.$"):
        torch.npu.NPUGraph().replay()


def test_capture_end_without_capture_begin_raises_and_keeps_the_pool():
    pool_before = torch_npu._C._thread_mem_pool(0)
    with pytest.raises(RuntimeError, match=r"^Capture must end on the same stream it began on\.$"):
        torch.npu.NPUGraph().capture_end()
    assert torch_npu._C._thread_mem_pool(0) == pool_before
    assert (torch.ones(2, device="npu") + 1).sum().item() == 4.0


def test_capture_end_on_another_stream_raises():
    g = torch.npu.NPUGraph()
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        g.capture_begin()
        torch.ones(2, device="npu").mul_(2)
    with torch.npu.stream(s2), pytest.raises(RuntimeError, match="^Capture must end on the same stream it began on"):
        g.capture_end()
    with torch.npu.stream(s1):
        g.capture_end()
    g.replay()


def test_make_graphed_callables_forward_and_backward_equal_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).npu()
    reference = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).npu()
    reference.load_state_dict(model.state_dict())
    sample = torch.randn(4, 8, device="npu", requires_grad=True)
    graphed = torch.npu.make_graphed_callables(model, (sample,))
    for _ in range(2):
        x = torch.randn(4, 8, device="npu", requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        out = graphed(x)
        out_ref = reference(x_ref)
        assert torch.equal(out.detach().cpu(), out_ref.detach().cpu())
        out.sum().backward()
        out_ref.sum().backward()
        assert torch.equal(x.grad.cpu(), x_ref.grad.cpu())
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p.grad.cpu(), q.grad.cpu())


def test_make_graphed_callables_needs_tensor_samples():
    with pytest.raises(TypeError, match="must contain only Tensors"):
        torch.npu.make_graphed_callables(lambda a, b: a, (torch.ones(1, device="npu"), 3))


def test_task_group_update_replaces_captured_work():
    x = torch.ones(3, device="npu")
    out = torch.empty(3, device="npu")
    stream = torch.npu.Stream()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, stream=stream):
        torch.npu.graph_task_group_begin(stream)
        torch.mul(x, 2, out=out)
        handle = torch.npu.graph_task_group_end(stream)
    with torch.npu.stream(stream):
        torch.npu.graph_task_update_begin(stream, handle)
        torch.mul(x, 10, out=out)
        torch.npu.graph_task_update_end(stream)
    out.zero_()
    g.replay()
    assert torch.equal(out.cpu(), torch.full((3,), 10.0))


def test_graph_update_with_registered_handler():
    @torch.npu.register_npu_graph_handler(["aten::add.Tensor"])
    class AddHandler(torch.npu.NpuGraphOpHandler):
        pass

    x = torch.ones(2, device="npu")
    g, y = _capture(lambda t: torch.add(t, t, alpha=1), x)
    g.update([{"alpha": 5}])
    g.replay()
    assert torch.equal(y.cpu(), torch.full((2,), 6.0))
    with pytest.raises(RuntimeError, match="got 2 updates for 1"):
        g.update([{"alpha": 1}, {"alpha": 2}])
    with pytest.raises(TypeError):
        torch.npu.register_npu_graph_handler("aten::mul.Tensor")(object)


def test_super_kernel_scopes_nest():
    torch.npu.super_kernel_scope_begin("a")
    torch.npu.super_kernel_scope_end("a")
    with pytest.raises(RuntimeError):
        torch.npu.super_kernel_scope_end("a")


def test_super_kernel_scope_and_options_leave_the_replay_as_captured():
    x, y = torch.randn(16, 16, device="npu"), torch.randn(16, 16, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        torch.npu.super_kernel_scope_begin("compute")
        out = torch.relu(x @ y)
        torch.npu.super_kernel_scope_end("compute")
    g.super_kernel_optimize(
        optimize_options={"preload_code": 1, "stream_fusion": 1, "opt_extend": "x", "early_start": True},
        debug_options={"debug_sync_all": 1, "debug_dcci_disable_on_kernel": ["MatMul"], "debug_extend": "y"},
    )
    x.copy_(torch.randn(16, 16))
    g.replay()
    assert torch.equal(out.cpu(), torch.relu(x @ y).cpu())


def test_npugraph_ex_backend_replays_a_compiled_graph(fresh_dynamo):
    from torch_npu.npu import npugraph_ex

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh()).npu().eval()
    compiled = torch.compile(model, backend=npugraph_ex.compile_fx)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(2, 8, device="npu")
            assert torch.equal(compiled(x).cpu(), model(x).cpu())


def test_npugraph_ex_cache_compile_and_readable_cache(tmp_path, capsys, fresh_dynamo):
    from torch_npu.npu.npugraph_ex import inference

    def double_plus_one(x):
        return x * 2 + 1

    compiled = inference.cache_compile(double_plus_one, cache_dir=str(tmp_path), global_rank=3)
    x = torch.arange(4.0, device="npu")
    with torch.no_grad():
        assert torch.equal(compiled(x).cpu(), (x * 2 + 1).cpu())
    (cache,) = list(tmp_path.iterdir())
    assert "rank3" in cache.name
    text = inference.readable_cache(str(cache))
    assert "def double_plus_one" in text and "def double_plus_one" in capsys.readouterr().out


def test_npugraph_ex_register_replacement_rewrites_compiled_graphs(fresh_dynamo):
    from torch_npu.npu import npugraph_ex

    def search(a):
        return torch.relu(a)

    def replace(a):
        return torch.clamp(a, min=0.0) * 0 + 7

    assert npugraph_ex.register_replacement(search, replace, [torch.ones(2)]) is True
    try:
        compiled = torch.compile(lambda t: torch.relu(t), backend=npugraph_ex.compile_fx)
        with torch.no_grad():
            assert torch.equal(compiled(torch.ones(3, device="npu")).cpu(), torch.full((3,), 7.0))
    finally:
        npugraph_ex._replacements.clear()
    with pytest.raises(TypeError):
        npugraph_ex.register_replacement(1, 2, [])


def test_npugraph_ex_scopes_restore_settings():
    from torch_npu.npu.npugraph_ex import scope

    try:
        with pytest.warns(UserWarning):
            with scope.deterministic(1):
                assert torch.are_deterministic_algorithms_enabled()
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
    s = torch.npu.current_stream()
    before = torch.npu.get_stream_limit(s)
    with scope.limit_core_num(4, 8):
        assert torch.npu.get_stream_limit(s) == {"cube_core_num": 4, "vector_core_num": 8}
    assert torch.npu.get_stream_limit(s) == before


# Bad input: the exact first line of the error (torch_npu's "[ERROR] ... ERRxxyyy" suffix follows it)
GRAPH_ERRORS = [
    (
        lambda: torch.npu.NPUGraph().capture_begin(capture_error_mode="strict"),
        RuntimeError,
        "Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, got strict",
    ),
    (
        lambda: torch.npu.NPUGraph().capture_begin(),
        RuntimeError,
        "NPU graphs must be captured on a non-default stream. (However, after capture, it's ok to replay them on the "
        "default stream.)",
    ),
    (lambda: torch.npu.NPUGraph().update({}), TypeError, "cpu_update_input must be a list of dicts"),
    (lambda: torch.npu.graph(object()), TypeError, "torch.npu.graph expects a torch.npu.NPUGraph"),
    (
        lambda: torch.npu.graph_task_group_end(torch.npu.Stream()),
        RuntimeError,
        "graph_task_group_end without graph_task_group_begin",
    ),
    (
        lambda: torch.npu.graph_task_update_end(torch.npu.Stream()),
        RuntimeError,
        "graph_task_update_end without graph_task_update_begin",
    ),
    (
        lambda: torch.npu.graph_task_group_begin(torch.npu.Stream()),
        RuntimeError,
        "graph_task_group_begin must be called while an NPU graph captures on this stream",
    ),
    (
        lambda: torch.npu.super_kernel_scope_end("x"),
        RuntimeError,
        "super_kernel_scope_end without super_kernel_scope_begin",
    ),
    (
        lambda: torch.npu.super_kernel_scope_begin("   "),
        RuntimeError,
        "super_kernel_scope_begin: scope_name must not be empty or blank, got '   '",
    ),
    (
        lambda: torch.npu.NPUGraph().super_kernel_optimize(optimize_options="fast"),
        RuntimeError,
        "super_kernel_optimize: optimize_options must be a dict or None, got str",
    ),
    (
        lambda: torch.npu.NPUGraph().super_kernel_optimize(debug_options={"debug_sync_all": "on"}),
        RuntimeError,
        "super_kernel_optimize: debug_options['debug_sync_all'] must be an int, got str",
    ),
    (
        lambda: torch.npu.NPUGraph().super_kernel_optimize(debug_options={"debug_dcci_before_kernel_start": 1}),
        RuntimeError,
        "super_kernel_optimize: debug_options['debug_dcci_before_kernel_start'] must be a list of kernel names, got int",
    ),
    (
        lambda: torch.npu.NPUGraph().super_kernel_optimize(optimize_options={"preload": 1}),
        RuntimeError,
        "super_kernel_optimize: unknown optimize_options key 'preload'; known: preload_code, split_mode, "
        "stream_fusion, constant_codegen, auto_op_parallel, early_start, opt_extend, ubuf_lock_ignore_kernel, "
        "dcci_disable_on_kernel, dcci_before_kernel_start, dcci_after_kernel_end, aggressive_opt_strategies",
    ),
    (  # valid options, but no capture yet (or still capturing)
        lambda: torch.npu.NPUGraph().super_kernel_optimize(optimize_options={"stream_fusion": 1}),
        RuntimeError,
        "Called NPUGraph::super_kernel_optimize without a preceding successful capture.",
    ),
    (
        lambda: graph_in_capture(lambda g: g.super_kernel_optimize()),
        RuntimeError,
        "Called NPUGraph::super_kernel_optimize without a preceding successful capture.",
    ),
    (
        lambda: torch.npu.register_npu_graph_handler("aten::mm")(int),
        TypeError,
        "register_npu_graph_handler decorates NpuGraphOpHandler subclasses",
    ),
    (
        lambda: graph_in_capture(lambda g: torch.npu.synchronize()),
        RuntimeError,
        "operation not permitted when stream is capturing: torch.npu.synchronize() synchronises the host with the device. "
        "Run it outside torch.npu.graph(...).",
    ),
    (
        lambda: torch.npu.make_graphed_callables(lambda a: a, (3,)),
        TypeError,
        "In the beta API, sample_args for each callable must contain only Tensors. Other types are not allowed.",
    ),
    (
        lambda: torch.npu.make_graphed_callables(hooked_linear(), (t(1, 2),)),
        RuntimeError,
        "Modules must not have hooks registered at the time they are passed. However, registering hooks on modules after "
        "passing them through make_graphed_callables is allowed.",
    ),
    (
        lambda: torch_npu.npu.npugraph_ex.register_replacement(1, 2, []),
        TypeError,
        "register_replacement expects search_fn and replace_fn functions",
    ),
]


@pytest.mark.parametrize("call,kind,message", GRAPH_ERRORS, ids=[c[2][:48] for c in GRAPH_ERRORS])
def test_graph_error_message(call, kind, message):
    raises_exactly(call, kind, message)


def test_streams_forked_from_the_capture_stream_are_captured_with_it():
    x = torch.ones(4, 4, device="npu")
    side, unrelated = torch.npu.Stream(), torch.npu.Stream()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        main = torch.npu.current_stream()
        a = x + x
        side.wait_stream(main)  # the fork: side joins the capture
        with torch.npu.stream(side):
            b = x * 3
        main.wait_stream(side)
        with torch.npu.stream(unrelated):  # never forked from the capture: runs now, outside the graph
            c = x - 1
    x.fill_(2.0)
    g.replay()
    assert torch.equal(a.cpu(), torch.full((4, 4), 4.0)) and torch.equal(b.cpu(), torch.full((4, 4), 6.0))
    assert torch.equal(c.cpu(), torch.zeros(4, 4))
    with torch.npu.stream(side):  # the capture ended: side is a stream of its own again
        x.add_(1)
    g.replay()
    assert torch.equal(a.cpu(), torch.full((4, 4), 6.0))
