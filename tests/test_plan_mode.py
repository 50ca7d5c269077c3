"""Planning mode (VNPU_PLAN=1): the allocator as in a real run, no host memory, no values; `vnpu plan`."""

import json
import os
import sys
import textwrap

import pytest
import torch
from subprocess_helpers import VNPU, client_env, run, run_process_group, run_python
from test_distributed import launch

PLAN = {"VNPU_PLAN": "1"}

STEPS = """
import sys, json, torch, torch.nn as nn, torch_npu
sys.path.insert(0, {bench!r})
from _models import Block
KEYS = ("allocated_bytes.all.current", "reserved_bytes.all.current", "segment.all.current",
        "active_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.peak", "active_bytes.all.peak",
        "requested_bytes.all.peak", "allocation.all.peak", "segment.all.peak")
cases = {{
    "mlp": (lambda: nn.Sequential(nn.Linear(256, 512), nn.LayerNorm(512), nn.GELU(), nn.Linear(512, 10)),
            lambda: torch.randn(64, 256, device="npu")),
    "cnn": (lambda: nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Flatten(), nn.Linear(16 * 16 * 16, 10)),
            lambda: torch.randn(8, 3, 32, 32, device="npu")),
    "gpt": (lambda: Block(128), lambda: torch.randn(4, 64, 128, device="npu")),
    "gpt_amp": (lambda: Block(128), lambda: torch.randn(4, 64, 128, device="npu")),
}}
out = {{}}
for name, (make, data) in cases.items():
    torch.npu.empty_cache(); torch.npu.reset_peak_memory_stats()
    model = make().npu(); opt = torch.optim.AdamW(model.parameters()); x = data()
    steps = []
    for _ in range(3):
        with torch.autocast("npu", dtype=torch.bfloat16, enabled=name == "gpt_amp"):
            loss = model(x).float().sum()
        loss.backward(); opt.step(); opt.zero_grad()
        stats = torch.npu.memory_stats()
        steps.append({{k: stats[k] for k in KEYS}})
    out[name] = steps
    del model, opt, x, loss
print(json.dumps(out))
"""


def _steps(env=None):
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
    return json.loads(run_python(STEPS.format(bench=bench), env=env).stdout.strip().splitlines()[-1])


def test_allocator_statistics_of_each_step_match_a_real_run():
    real, plan = _steps(), _steps(PLAN)
    for name in real:
        for step, (r, p) in enumerate(zip(real[name], plan[name])):
            assert p == r, (name, step)


TRAIN_AND_RECORD = """
for _ in range(2):
    model(x).sum().backward(); opt.step(); opt.zero_grad()
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump([rank, torch.npu.max_memory_allocated(), torch.npu.memory_allocated()], f)
dist.destroy_process_group()
"""

FSDP = (
    """
import json, sys, torch, torch.nn as nn, torch.distributed as dist, torch_npu
from torch.distributed.fsdp import fully_shard
out = sys.argv[1]
dist.init_process_group("hccl")
rank = dist.get_rank(); torch.npu.set_device(rank)
torch.manual_seed(0)
with torch.device("npu"):
    model = nn.Sequential(*[nn.Linear(512, 512) for _ in range(4)])
for layer in model:
    fully_shard(layer)
fully_shard(model)
opt = torch.optim.AdamW(model.parameters())
x = torch.randn(16, 512, device="npu")
"""
    + TRAIN_AND_RECORD
)


def _run_group(args, env, timeout=180):
    """Runs a launcher in its own process group: one that hangs is killed with every process it started."""
    return run_process_group(args, client_env(**env), timeout)


DDP = (
    """
import json, sys, torch, torch.nn as nn, torch.distributed as dist, torch_npu
out = sys.argv[1]
dist.init_process_group("hccl")
rank = dist.get_rank(); torch.npu.set_device(rank)
with torch.device("meta"):  # no initialisation cost: materialised on npu
    model = nn.Sequential(*[nn.Linear(512, 512) for _ in range(4)])
model = nn.parallel.DistributedDataParallel(model.to_empty(device="npu"), bucket_cap_mb=1)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x = torch.empty(16, 512, device="npu")
"""
    + TRAIN_AND_RECORD
)


def _fsdp(tmp_path, env, name, ranks=2, program=FSDP):
    """Each rank's record of `program` run on `ranks` ranks (forked by the suite's rank launcher)."""
    script = tmp_path / f"{name}.py"
    script.write_text(program)
    out = tmp_path / name
    out.mkdir()
    for rank, (code, output) in enumerate(launch(str(out), ranks, timeout=180, extra_env=env, worker=str(script))):
        assert code == 0, f"rank {rank} exited {code}:\n{output[-3000:]}"
    return sorted(json.loads(path.read_text()) for path in out.iterdir())


def test_fsdp_over_two_ranks_plans_the_memory_of_a_real_run(tmp_path):
    real, plan = _fsdp(tmp_path, {}, "real"), _fsdp(tmp_path, PLAN, "plan")
    assert len(real) == 2 and [p[0] for p in plan] == [0, 1]
    for (_, real_peak, real_now), (_, plan_peak, plan_now) in zip(real, plan):
        assert (plan_peak, plan_now) == (real_peak, real_now)


def test_ddp_from_meta_weights_plans_the_memory_of_a_real_run(tmp_path):
    real, plan = _fsdp(tmp_path, {}, "real", program=DDP), _fsdp(tmp_path, PLAN, "plan", program=DDP)
    assert len(real) == 2 and plan == real


COLLECTIVE_VALUES = """
import json, sys, torch, torch.distributed as dist, torch_npu
out = sys.argv[1]
dist.init_process_group("hccl")
rank = dist.get_rank(); torch.npu.set_device(rank)
kept = torch.tensor([7, 8], device="npu")
dist.broadcast(kept, 0)  # every planned rank runs the same program: a broadcast leaves what it has
summed = torch.tensor([rank + 1], device="npu")
dist.all_reduce(summed)  # the transport moves nothing: no values
try:
    summed.cpu()
    lost = "no error"
except RuntimeError as e:
    lost = str(e).split(" needs them")[0]
def resident_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 >> 20
before = resident_mib()
shard = torch.empty(64 * 2**20, device="npu")  # 256 MiB a rank: collectives must not back it
gathered = torch.empty(2 * 64 * 2**20, device="npu")
dist.all_gather_into_tensor(gathered, shard)
dist.all_reduce(shard)
dist.reduce_scatter_tensor(shard, gathered)
dist.broadcast(gathered, 0)
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump([rank, kept.tolist(), lost, resident_mib() - before < 32], f)
dist.destroy_process_group()
"""


def test_collectives_other_than_broadcast_leave_no_values(tmp_path):
    ranks = _fsdp(tmp_path, PLAN, "values", program=COLLECTIVE_VALUES)
    lost = "vnpu plan mode computes no values, but copying an npu tensor to the cpu (.cpu(), .numpy(), printing)"
    assert ranks == [[0, [7, 8], lost, True], [1, [7, 8], lost, True]]


def test_fsdp_over_eight_ranks_plans_a_shard_per_rank(tmp_path):
    eight = _fsdp(tmp_path, PLAN, "eight", ranks=8)
    assert [rank for rank, _, _ in eight] == list(range(8))
    assert len({(peak, now) for _, peak, now in eight}) == 1  # every rank holds the same share
    _, peak, now = eight[0]
    # What stays: an eighth of the parameters and of AdamW's two states (block rounding aside).
    share = 3 * 4 * (512 * 512 + 512) * 4 / 8
    assert share <= now <= 1.04 * share, now
    assert now < peak


def test_a_7b_transformer_step_plans_in_seconds_with_little_host_memory():
    pytest.importorskip("transformers", reason="transformers is a test dependency (make test installs it)")
    code = """
    import json, resource, time, torch, torch_npu
    from transformers import LlamaConfig, LlamaForCausalLM
    start = time.time()
    cfg = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=32, vocab_size=32000)
    with torch.device("npu"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    ids = torch.randint(0, 32000, (1, 512), device="npu")
    model(input_ids=ids, labels=ids).loss.backward()
    print(json.dumps([sum(p.numel() for p in model.parameters()), torch.npu.max_memory_allocated(),
                      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, time.time() - start]))
    """
    params, peak, rss, seconds = json.loads(last := run_python(code, env=PLAN, timeout=300).stdout.splitlines()[-1])
    assert params > 6.5e9, last
    assert peak > params * 2  # bf16 weights, gradients and activations
    assert rss < 4 * 2**30
    assert seconds < 60


VALUE_ERRORS = """import torch, torch_npu
x = torch.randn(300_000, device="npu")  # more than planning mode keeps values for
def attempt(action):
    try:
        action()
    except (RuntimeError, NotImplementedError) as e:
        print(str(e).splitlines()[0])
attempt(lambda: x.sum().item())
attempt(lambda: torch.masked_select(x, x > 0))
attempt(lambda: print(x))  # (an npu tensor prints from a host copy, as torch_npu does)
attempt(lambda: torch.nonzero(x))
attempt(lambda: bool(x.sum() > 0))
attempt(lambda: torch.empty(300_000).copy_(x))
attempt(lambda: torch.geqrf(torch.empty(3, 3, device="npu")))
attempt(lambda: x.cpu())
"""


def test_everything_that_needs_values_raises_one_error_naming_operator_and_line():
    lines = run_python(VALUE_ERRORS, env=PLAN).stdout.strip().splitlines()
    tail = (
        " needs them (at <string>:{}). Planning mode (VNPU_PLAN=1) runs shapes, dtypes and memory only: keep "
        "value-dependent code (.item(), printing, .cpu(), data-dependent control flow) out of a planned step."
    )
    head = "vnpu plan mode computes no values, but "
    needed = [
        "aten::_local_scalar_dense",
        "aten::masked_select",
        "copying an npu tensor to the cpu (.cpu(), .numpy(), printing)",
        "aten::nonzero",
        "aten::_local_scalar_dense",
        "writing into a cpu tensor (aten::copy_)",
    ]
    assert lines[:6] == [head + what + tail.format(line) for line, what in enumerate(needed, start=8)]
    assert (
        lines[6]
        == "vnpu plan mode: aten::geqrf has no shape function (Meta kernel), so planning mode cannot run it (at <string>:14)"
    )
    assert lines[7] == head + needed[2] + tail.format(15)


def test_small_data_keeps_its_values_while_it_is_computed_from_values():
    out = (
        run_python(
            """
        import torch, torch_npu
        def attempt(f):
            try:
                return f()
            except RuntimeError as e:
                return str(e).split(" needs them")[0].removeprefix("vnpu plan mode computes no values, but ")
        torch.manual_seed(0)
        t = torch.tensor([3, 1, 2], device="npu")
        host = torch.empty(3, dtype=torch.long)
        host.copy_(t)
        ids = torch.randint(0, 10, (4,), device="npu")
        pos = torch.arange(6, device="npu").reshape(2, 3)
        print([t.tolist(), t[1].item(), t.float().cpu().tolist(), host.tolist(), (t * 2).tolist(), ids.tolist(),
               pos.cumsum(-1).tolist(), bool((pos > 2).all())])
        big = torch.ones(300_000, device="npu")  # 1.2 MB: more than planning mode keeps values for
        s = torch.zeros(3, device="npu")
        s.add_(big[:3])
        print([attempt(big.cpu), attempt(lambda: big.sum().item()), attempt(s.cpu)])
        """,
            env=PLAN,
        )
        .stdout.strip()
        .splitlines()
    )
    torch.manual_seed(0)
    ids = torch.randint(0, 10, (4,)).tolist()  # the npu generator draws what the CPU's does
    assert out[0] == str([[3, 1, 2], 1, [3.0, 1.0, 2.0], [3, 1, 2], [6, 2, 4], ids, [[0, 1, 3], [3, 7, 12]], False])
    cpu = "copying an npu tensor to the cpu (.cpu(), .numpy(), printing)"
    assert out[1] == str([cpu, "aten::_local_scalar_dense", cpu])


def test_views_in_place_and_resize_keep_their_meaning_without_values():
    out = run_python(
        """
        import torch, torch_npu
        a = torch.empty(4, 6, device="npu")
        v = a.t()[1:]
        v.add_(1)
        b = torch.cat([a, a])
        a.resize_(100)
        print(v.shape, v.stride(), v.untyped_storage().data_ptr() == a.untyped_storage().data_ptr(), b.shape,
              a.shape, a.untyped_storage().nbytes(), b.device)
        """,
        env=PLAN,
    ).stdout.strip()
    assert out == "torch.Size([5, 4]) (1, 6) True torch.Size([8, 6]) torch.Size([100]) 400 npu:0"


def test_vnpu_plan_judges_the_job_on_each_soc(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch, torch_npu
            weights = torch.empty(40 * 2**30, dtype=torch.uint8, device="npu")
            y = torch.empty(1024, 1024, device="npu") @ torch.empty(1024, 1024, device="npu")
            """
        )
    )
    report = tmp_path / "plan.json"
    socs = "Ascend910B1,Ascend910B4,Ascend910_9391"
    plan = [sys.executable, "-m", "vnpu.cli", "plan", "--soc", socs, "--report", str(report)]
    proc = _run_group([*plan, "--", sys.executable, str(script)], {})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(report.read_text())
    (device,) = result["devices"]
    assert 40 * 2**30 + 12 * 2**20 <= device["allocated_bytes.all.peak"] <= 40 * 2**30 + 13 * 2**20
    verdicts = {v["soc"]: v for v in result["verdicts"]}
    assert verdicts["Ascend910B1"]["fits"] and verdicts["Ascend910_9391"]["fits"]
    assert not verdicts["Ascend910B4"]["fits"]
    assert verdicts["Ascend910B4"]["margin_bytes"] == 32 * 2**30 - device["reserved_bytes.all.peak"]
    assert verdicts["Ascend910B4"]["compute_seconds"] > verdicts["Ascend910B1"]["compute_seconds"] > 0
    assert "does not fit by" in proc.stdout


def test_vnpu_plan_says_when_the_program_wrote_no_plan():
    proc = _run_group([sys.executable, "-m", "vnpu.cli", "plan", "--", sys.executable, "-c", "pass"], {})
    assert proc.returncode == 1
    assert proc.stderr == "vnpu plan: the program wrote no plan (exit status 0); did it import torch?\n"


@pytest.mark.parametrize(
    "args, last_line",
    [
        (
            ["--soc", "Ascend999", "--", "true"],
            "vnpu plan: error: unknown SoC Ascend999; known: Ascend310P3, Ascend910A, Ascend910B1, Ascend910B2, "
            "Ascend910B2C, Ascend910B3, Ascend910B4, Ascend910B4-1, Ascend910ProB, Ascend910_9362, Ascend910_9372, "
            "Ascend910_9381, Ascend910_9382, Ascend910_9391, Ascend910_9392",
        ),
        (["--steps", "0", "--", "true"], "vnpu plan: error: --steps must be at least 1"),
        (["--report", "p.txt", "--", "true"], "vnpu plan: error: --report must end in .md, .json or .html, got p.txt"),
        (["--soc", "Ascend910B1", "--"], "vnpu plan: error: no program after --"),
        (
            ["--soc", "Ascend910B1"],
            "vnpu plan: give the program after --, e.g. vnpu plan --soc Ascend910B4 -- python train.py",
        ),
    ],
)
def test_vnpu_plan_refuses_bad_arguments(args, last_line):
    proc = run([*VNPU, "plan", *args], client_env(), timeout=120)
    assert proc.returncode == (2 if "error:" in last_line else 1)
    assert proc.stderr.strip().splitlines()[-1] == last_line


def test_compiled_functions_and_recurrent_layers_plan_without_computing():
    out = run_python(
        """
        import json, os, torch, torch.nn as nn, torch_npu

        def resident_mib():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20

        mlp = nn.Sequential(nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 4096)).npu()
        lstm = nn.LSTM(1024, 1024, num_layers=2).npu()
        gru = nn.GRU(1024, 1024, bidirectional=True).npu()
        compiled = torch.compile(mlp, fullgraph=True)
        before = resident_mib()
        y = compiled(torch.empty(8192, 4096, device="npu"))
        y.sum().backward()
        seq = torch.empty(256, 64, 1024, device="npu")
        h, (hn, cn) = lstm(seq)
        g, gn = gru(seq)
        (h.sum() + g.sum()).backward()
        print(json.dumps([list(y.shape), list(h.shape), list(cn.shape), list(g.shape), list(gn.shape),
                          lstm.weight_hh_l1.grad is not None, gru.weight_ih_l0_reverse.grad is not None,
                          torch.npu.max_memory_allocated() >> 20, resident_mib() - before]))
        """,
        env=PLAN,
        timeout=300,
    )
    y, h, cn, g, gn, lstm_grad, gru_grad, peak_mib, grown_mib = json.loads(out.stdout.strip().splitlines()[-1])
    assert [y, h, cn, g, gn] == [[8192, 4096], [256, 64, 1024], [2, 64, 1024], [256, 64, 2048], [2, 64, 1024]]
    assert lstm_grad and gru_grad
    assert peak_mib > 1500  # what a real step would hold...
    assert grown_mib < 200, grown_mib  # ...while the host backs none of it


def test_activation_checkpointing_and_the_profiler_run_in_planning_mode(tmp_path):
    out = (
        run_python(
            f"""
        import os, torch, torch.nn as nn, torch_npu
        from torch.utils.checkpoint import checkpoint
        m = nn.Sequential(nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 256)).npu()
        x = torch.randn(32, 256, device="npu", requires_grad=True)
        checkpoint(m, x, use_reentrant=False).sum().backward()
        handler = torch_npu.profiler.tensorboard_trace_handler({str(tmp_path)!r})
        with torch_npu.profiler.profile(on_trace_ready=handler):
            m(x).sum().backward()
        session = next(d for d in os.listdir({str(tmp_path)!r}) if d.endswith("_ascend_pt"))
        print(tuple(x.grad.shape), m[0].weight.grad.shape == m[0].weight.shape,
              os.path.exists(os.path.join({str(tmp_path)!r}, session, "ASCEND_PROFILER_OUTPUT", "trace_view.json")))
        """,
            env=PLAN,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    assert out == "(32, 256) True True"
