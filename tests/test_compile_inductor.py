"""torch.compile's default backend (inductor) on npu: npu graphs compile to the CPU's kernels and run on npu
memory, so compiled npu training computes exactly what compiled CPU training computes, and stays within
compile tolerances of eager npu."""

import os
import sys

import pytest
import torch
import torch.nn.functional as F
from compile_models import CNN, MLP, Block, DropoutMLP, FeatureDropoutMLP, train
from subprocess_helpers import run_python

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def assert_same(a, b):
    assert a[0] == b[0]
    for x, y in zip(a[1], b[1], strict=True):
        assert torch.equal(x, y)


def assert_close(a, b, tol=1e-4):
    assert a[0] == pytest.approx(b[0], rel=tol, abs=tol)
    for x, y in zip(a[1], b[1], strict=True):
        torch.testing.assert_close(x, y, rtol=tol, atol=tol)


@pytest.mark.parametrize("make,kwargs", [(MLP, {}), (CNN, {}), (Block, {})], ids=["mlp", "cnn_batchnorm", "block"])
def test_compiled_npu_training_equals_compiled_cpu_training(make, kwargs):
    npu = train(make, "npu", compile_kwargs={}, **kwargs)
    cpu = train(make, "cpu", compile_kwargs={}, **kwargs)
    assert_same(npu, cpu)
    assert_close(npu, train(make, "npu", **kwargs))  # and close to eager npu


@pytest.mark.parametrize("make", [DropoutMLP, FeatureDropoutMLP], ids=["dropout", "feature_dropout"])
def test_compiled_dropout_draws_the_cpus_masks(make):
    # dropout: the traced graph holds the CPU's native_dropout, not eager npu's Bernoulli noise; feature dropout: ATen's
    # bernoulli stays in the graph as on the CPU (not rand < p): same masks, same bits
    assert_same(train(make, "npu", compile_kwargs={}, steps=4), train(make, "cpu", compile_kwargs={}, steps=4))


@pytest.mark.parametrize(
    "op,shapes",
    [
        (torch.addmm, [(8,), (1, 8), (8, 8)]),  # batch-1 Linear(8, 8): a sum of products on the CPU
        (torch.addmm, [(1,), (1, 12), (12, 1)]),  # batch-1 Linear(12, 1)
        (torch.addmm, [(64,), (1, 64), (64, 64)]),  # BLAS on both
        (torch.mm, [(1, 40), (40, 1)]),
        (torch.mm, [(5, 1), (1, 6)]),
        (torch.bmm, [(3, 1, 32), (3, 32, 1)]),
    ],
    ids=["addmm_row_small", "addmm_row_column", "addmm_blas", "mm_row_column", "mm_outer", "bmm_row_column"],
)
def test_small_matmuls_compile_to_the_cpus_graph(op, shapes):
    g = torch.Generator().manual_seed(0)
    args = [torch.randn(*s, generator=g) for s in shapes]
    expected = torch.compile(op)(*args)
    torch._dynamo.reset()
    assert torch.equal(torch.compile(op)(*(a.npu() for a in args)).cpu(), expected)


def test_npu_operators_inside_compiled_graphs_forward_and_backward():
    compiled = train(Block, "npu", compile_kwargs={"fullgraph": True}, npu_ops=True)
    eager = train(Block, "npu", npu_ops=True)
    assert_close(compiled, eager)
    assert_close(compiled, train(Block, "npu"), tol=1e-3)  # the same block in plain PyTorch


@pytest.mark.parametrize("amp_dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_autocast_training_compiles(amp_dtype):
    compiled = train(MLP, "npu", compile_kwargs={}, amp_dtype=amp_dtype)
    eager = train(MLP, "npu", amp_dtype=amp_dtype)
    assert_close(compiled, eager, tol=2e-2)
    assert compiled[0][-1] < compiled[0][0]


def test_results_stay_on_the_graphs_npu_device():
    model = MLP().to("npu:1")
    x = torch.randn(8, 16, device="npu:1")
    torch.npu.set_device(0)
    out = torch.compile(model)(x)
    assert out.device == torch.device("npu", 1)
    torch.testing.assert_close(out, model(x))


def test_views_of_inputs_stay_views_and_inputs_mutated_in_place():
    def f(x, y):
        y.add_(1)
        return x.t(), x * 2

    x, y = torch.randn(3, 4, device="npu"), torch.zeros(2, device="npu")
    t, doubled = torch.compile(f)(x, y)
    assert t.device.type == "npu" and t.data_ptr() == x.data_ptr() and t.shape == (4, 3)
    assert torch.equal(doubled, x * 2) and y.tolist() == [1.0, 1.0]


def test_buffers_of_compiled_code_come_from_the_npu_allocator():
    x = torch.randn(256, 256, device="npu")
    fn = torch.compile(lambda t: torch.mm(t, t.t()).relu().sum(0))  # mm's 256 KiB result is a buffer
    fn(x)
    torch.npu.reset_peak_memory_stats()
    before = torch.npu.memory_allocated()
    out = fn(x)
    assert out.device.type == "npu"
    assert torch.npu.max_memory_allocated() - before >= 256 * 256 * 4
    held = torch.npu.memory_allocated() - before
    like_out = torch.empty_like(out)  # the result alone is what stays allocated
    assert torch.npu.memory_allocated() - before - held == held
    del out, like_out
    assert torch.npu.memory_allocated() == before


def test_dynamic_shapes_compile_once():
    calls = []

    def backend(gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx

        calls.append(len(gm.graph.nodes))
        return compile_fx(gm, example_inputs)

    fn = torch.compile(lambda x: F.gelu(x * 2).sum(-1), backend=backend, dynamic=True)
    for n in (3, 5, 9):
        x = torch.randn(n, 8, device="npu")
        torch.testing.assert_close(fn(x), F.gelu(x * 2).sum(-1))
    assert len(calls) == 1
    auto = torch.compile(lambda x: F.gelu(x * 2).sum(-1), backend=backend)  # automatic dynamic: one recompile
    for n in (3, 5, 9):
        auto(torch.randn(n, 8, device="npu"))
    assert len(calls) == 3


@pytest.mark.parametrize("dynamic", [False, True])
def test_attention_with_grouped_heads_compiles_to_the_cpus_code(dynamic):
    # SDPA picks its kernel from the inputs' metadata; under tracing they are fake or functional tensors,
    # with symbolic sizes when dynamic (Llama-style models with grouped KV heads, trained compiled)
    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, scale=0.25)

    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 16, 16), torch.randn(2, 2, 16, 16)
    results = {}
    for device in ("cpu", "npu"):
        torch._dynamo.reset()
        qd, kd = q.clone().to(device).requires_grad_(), k.clone().to(device).requires_grad_()
        out = torch.compile(attention, dynamic=dynamic)(qd, kd, kd)
        out.sum().backward()
        results[device] = [t.detach().cpu() for t in (out, qd.grad, kd.grad)]
    for npu, cpu in zip(results["npu"], results["cpu"]):
        assert torch.equal(npu, cpu)


def test_freezing_makes_the_npu_parameters_constants_of_the_compiled_code():
    import torch._inductor.config as inductor_config

    def model():
        torch.manual_seed(0)
        layers = [torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Flatten()]
        return torch.nn.Sequential(*layers, torch.nn.Linear(8 * 6 * 6, 10)).eval()

    x = torch.randn(2, 3, 8, 8)
    with inductor_config.patch(freezing=True), torch.no_grad():
        torch._dynamo.reset()
        on_cpu = torch.compile(model())(x)
        torch._dynamo.reset()
        npu_model = model().npu()
        compiled = torch.compile(npu_model)
        on_npu = compiled(x.npu())
        assert on_npu.device.type == "npu"
        # the CPU's freezing passes (oneDNN weight packing, layout choices) see an npu graph: rounding differs
        torch.testing.assert_close(on_npu.cpu(), on_cpu, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(compiled(x.npu()), on_npu, rtol=0, atol=0)


def _branches(x):
    return torch.cond(x.sum() > 0, lambda t: (t * 3).relu(), lambda t: t.abs() - 1, (x,))


def _doubling_loop(x):
    from torch._higher_order_ops import while_loop

    return while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t * 2 + 1), (torch.tensor(0, device=x.device), x))[1]


@pytest.mark.parametrize("fn", [_branches, _doubling_loop])
def test_control_flow_operators_compile_with_their_subgraphs(fn):
    results = {}
    for device in ("cpu", "npu"):
        torch._dynamo.reset()
        compiled = torch.compile(fn, fullgraph=True)
        results[device] = [compiled(torch.full((5,), value, device=device)).cpu() for value in (0.5, -0.5)]
    for npu, cpu in zip(results["npu"], results["cpu"]):
        assert torch.equal(npu, cpu)


def test_graph_breaks_and_explain():
    def f(x):
        y = x.sin()
        print("graph break")
        return y.cos()

    x = torch.randn(4, device="npu")
    explanation = torch._dynamo.explain(f)(x)
    assert explanation.graph_count == 2 and explanation.graph_break_count == 1
    torch.testing.assert_close(torch.compile(f)(x), x.sin().cos())
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(f, fullgraph=True)(x)


def test_run_and_get_code_shows_host_kernels_and_set_stance():
    from torch._inductor.utils import run_and_get_code

    def f(x):
        return (x.exp() + 1).sum(0)

    x = torch.randn(8, 8, device="npu")
    out, code = run_and_get_code(torch.compile(f), x)
    assert "cpp_fused" in code[0] and "async_compile.cpp_pybinding" in code[0]
    torch.testing.assert_close(out, f(x))
    with torch.compiler.set_stance("force_eager"):
        assert torch.equal(torch.compile(f)(x), f(x))


def test_npu_backend_option_is_accepted_and_validated():
    x = torch.randn(4, device="npu")
    for backend in ("default", "mlir", "dvm", "ascendc"):
        torch._dynamo.reset()
        assert torch.equal(torch.compile(lambda t: t * 3, options={"npu_backend": backend})(x), x * 3)
    assert torch._inductor.config.npu_backend == "default"
    torch._dynamo.reset()
    with pytest.raises(Exception, match="npu_backend must be one of 'default', 'mlir', 'dvm', 'ascendc', got 'cuda'"):
        torch.compile(lambda t: t * 3, options={"npu_backend": "cuda"})(x)


def test_npu_backend_environment_variable():
    chosen = run_python(
        """
        import torch, torch_npu
        import torch._inductor.config as config
        print(config.npu_backend, torch.compile(lambda t: t + 1)(torch.ones(2, device="npu")).tolist())
    """,
        env={"TORCHINDUCTOR_NPU_BACKEND": "dvm"},
        timeout=300,
    )
    assert chosen.stdout.split() == ["dvm", "[2.0,", "2.0]"]
    refused = run_python("import torch", env={"TORCHINDUCTOR_NPU_BACKEND": "tvm"}, check=False)
    assert refused.returncode != 0
    assert (
        "Invalid value 'tvm' of environment variable TORCHINDUCTOR_NPU_BACKEND: expected one of default, "
        "mlir, dvm, ascendc"
    ) in refused.stderr


def _gelu_div(x, w):
    return F.gelu(x @ w).div(3.0) + 1


@pytest.mark.parametrize(
    "listed,fallbacks", [("aten.div", ["aten.div.Tensor"]), ("allfallback", ["aten.div.Tensor", "aten.erf.default"])]
)
def test_fallback_list_leaves_operators_to_aten_in_npu_graphs_only(monkeypatch, listed, fallbacks):
    from torch._inductor.lowering import lowerings
    from torch._inductor.utils import run_and_get_code

    monkeypatch.setenv("NPU_INDUCTOR_FALLBACK_LIST", listed)
    before = dict(lowerings)
    x, w = torch.randn(8, 16), torch.randn(16, 16)
    out, (code,) = run_and_get_code(torch.compile(_gelu_div), x.npu(), w.npu())
    assert all(f"torch.ops.{op}(" in code for op in fallbacks)
    torch.testing.assert_close(out, _gelu_div(x.npu(), w.npu()))
    assert out.device.type == "npu"
    assert lowerings == before  # the lowerings are inductor's again once the npu graph is compiled
    _, (cpu_code,) = run_and_get_code(torch.compile(_gelu_div), x, w)
    assert "torch.ops.aten.div.Tensor(" not in cpu_code


def test_fallback_list_ignores_names_it_cannot_resolve(monkeypatch):
    monkeypatch.setenv("NPU_INDUCTOR_FALLBACK_LIST", "aten.not_an_operator,aten.div")
    x = torch.randn(4, 4, device="npu")
    with pytest.warns(UserWarning, match="NPU_INDUCTOR_FALLBACK_LIST: cannot resolve operator 'aten.not_an_operator'"):
        out = torch.compile(lambda t: t.div(3.0))(x)
    torch.testing.assert_close(out, x.div(3.0))


def test_torch_logs_print_the_code_generated_for_npu_graphs():
    proc = run_python(
        """
        import torch, torch_npu
        torch.compile(lambda t: (t.exp() + 1).sum(0))(torch.randn(4, 4, device="npu"))
    """,
        env={"TORCH_LOGS": "output_code"},
        timeout=300,
    )
    assert "Output code" in proc.stderr and "cpp_fused_add_exp_sum_0" in proc.stderr


def test_torch_export_and_compiled_autograd_on_npu():
    class Attention(torch.nn.Module):
        def forward(self, q):
            return F.scaled_dot_product_attention(q, q, q, is_causal=True)

    q = torch.randn(1, 2, 4, 8, device="npu")
    program = torch.export.export(Attention().npu(), (q,))
    torch.testing.assert_close(program.module()(q), Attention()(q))
    model = MLP().npu()
    x = torch.randn(8, 16, device="npu")
    expected = torch.autograd.grad(model(x).sum(), model.net[0].weight)[0]
    with torch._dynamo.compiled_autograd._enable(torch.compile):
        torch.compile(model)(x).sum().backward()
    torch.testing.assert_close(model.net[0].weight.grad, expected)


def test_compiled_code_running_out_of_device_memory_raises_torch_npus_oom():
    proc = run_python(
        """
        import torch, torch_npu
        fn = torch.compile(lambda t: torch.mm(t, t.t()).relu().sum(0))
        x = torch.randn(3000, 8, device="npu")
        try:
            fn(x)
        except torch.OutOfMemoryError as e:
            print("OOM", str(e).splitlines()[0][:40])
    """,
        env={"VNPU_DEVICE_MEMORY": "16MiB"},
        timeout=300,
    )
    assert "OOM NPU out of memory. Tried to allocate" in proc.stdout


@pytest.mark.long
def test_nanogpt_style_script_with_compile_under_vnpu_run(tmp_path):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "nanogpt_train.py")
    from subprocess_helpers import VNPU, checked, client_env, run

    env = client_env()
    env.pop("TORCHINDUCTOR_COMPILE_THREADS", None)  # Inductor's compile workers, as by default (conftest sets one)
    npu = checked(
        run(
            VNPU + ["run", "--report", str(tmp_path / "report.md"), script, "--device=npu", "--max_iters=4"],
            env,
            timeout=600,
            cwd=str(tmp_path),
        )
    )
    cpu = checked(run([sys.executable, script, "--device=cpu", "--max_iters=4"], env, timeout=600))
    losses = [line for line in npu.stdout.splitlines() if line.startswith("iter ")]
    assert len(losses) == 4 and losses == [line for line in cpu.stdout.splitlines() if line.startswith("iter ")]
    assert "npu:0" in (tmp_path / "report.md").read_text()


def test_torch_npus_dynamo_interface_registration_name():
    from torch._dynamo.device_interface import get_interface_for_device

    from torch_npu.utils._dynamo import _dynamo_register_interface_for_device

    assert _dynamo_register_interface_for_device() is True
    interface = get_interface_for_device("npu:1")
    assert interface is get_interface_for_device("npu") and interface.device_count() == torch.npu.device_count()
