"""torch.compile over code that uses the npu runtime: streams and events built and switched inside the graph,
`torch.npu.current_stream()` answered by Dynamo, `torch.npu.amp.autocast()` entered as an autocast region — all
with fullgraph=True (one graph, no break) and the eager results bit for bit. `torch.npu.synchronize()` stays a
graph break, as torch_npu marks it. The deterministic-level guard: code compiled at one level is compiled again at
another where torch_npu guards it (its own guard called by a backend; inductor with npu_backend="ascendc")."""

import pytest
import torch

import torch_npu

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def compiled(fn, backend="aot_eager"):
    return torch.compile(fn, backend=backend, fullgraph=True)


def same(a, b):
    return a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)


def side_stream_add(x):
    a = x * x
    s = torch.npu.Stream()
    s.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(s):
        b = x + a
    torch.npu.current_stream().wait_stream(s)
    return b


def event_between(x):
    e = torch.npu.Event()
    y = x * 2
    e.record()
    e.wait()
    return y + 1


def set_and_restore_stream(x):
    s = torch.npu.Stream()
    previous = torch.npu.current_stream()
    torch.npu.set_stream(s)
    y = x * 3
    torch.npu.set_stream(previous)
    return y


def record_on_current_stream(x):
    y = x * 2
    y.record_stream(torch.npu.current_stream())
    return y


@pytest.mark.parametrize("fn", [side_stream_add, event_between, set_and_restore_stream, record_on_current_stream])
def test_stream_and_event_code_compiles_to_one_graph_with_the_eager_result(fn):
    x = torch.randn(4, 8).npu()
    before = torch.npu.current_stream()
    assert same(compiled(fn)(x), fn(x))
    assert torch.npu.current_stream() == before


def test_current_stream_inside_a_graph_is_the_current_stream():
    x = torch.zeros(1, device="npu")
    assert compiled(lambda t: torch.npu.current_stream(), backend="eager")(x) == torch.npu.current_stream()


@pytest.mark.parametrize(
    "kwargs, dtype",
    [({}, torch.float16), ({"dtype": torch.bfloat16}, torch.bfloat16), ({"enabled": False}, torch.float32)],
)
def test_npu_amp_autocast_is_an_autocast_region_in_the_graph(kwargs, dtype):
    def fn(x):
        with torch.npu.amp.autocast(**kwargs):
            return x @ x.t()

    x = torch.randn(8, 8).npu()
    out = compiled(fn)(x)
    assert out.dtype == dtype
    assert same(out, fn(x))


def test_synchronize_breaks_the_graph_as_in_torch_npu():
    def fn(x):
        y = x + 1
        torch.npu.synchronize()
        return y

    with pytest.raises(torch._dynamo.exc.Unsupported):
        compiled(fn)(torch.ones(2, device="npu"))
    assert torch_npu.npu.synchronize is torch.npu.synchronize


@pytest.fixture
def level_zero_after():
    yield
    torch_npu.npu.set_deterministic_level(0)


def compiles_per_level(compile_fn, levels):
    """How many times a function is compiled while it runs at each deterministic level in turn."""
    backends = []

    def counting(gm, example_inputs):
        backends.append(gm)
        return compile_fn(gm, example_inputs)

    fn = torch.compile(lambda t: t + 1, backend=counting, fullgraph=True, dynamic=False)
    x = torch.ones(2, device="npu")
    for level in levels:
        torch_npu.npu.set_deterministic_level(level)
        assert torch.equal(fn(x), x + 1)
    return len(backends)


@pytest.mark.usefixtures("level_zero_after")
@pytest.mark.filterwarnings("ignore:.*deterministic:UserWarning")
def test_the_deterministic_level_guard_recompiles_per_level_inside_a_compilation_only():
    from torch_npu.dynamo._deterministic_guard import install_npu_deterministic_level_guard

    assert install_npu_deterministic_level_guard() is False  # no compilation, nothing to guard

    def guarded(gm, example_inputs):
        assert install_npu_deterministic_level_guard() is True
        return gm.forward

    assert compiles_per_level(guarded, (1, 2, 1, 2)) == 2
    torch._dynamo.reset()
    assert compiles_per_level(lambda gm, inputs: gm.forward, (1, 2, 1, 2)) == 1


@pytest.mark.usefixtures("level_zero_after")
@pytest.mark.filterwarnings("ignore:.*deterministic:UserWarning")
@pytest.mark.parametrize("backend, compiles", [("ascendc", 2), ("default", 1)])
def test_inductor_guards_the_deterministic_level_for_ascendc_kernels_only(backend, compiles):
    from torch._inductor.compile_fx import compile_fx

    with torch._inductor.config.patch(npu_backend=backend):
        assert compiles_per_level(compile_fx, (1, 2, 1, 2)) == compiles
