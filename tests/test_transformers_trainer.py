"""transformers' Trainer on npu, as its users run it: with torch_npu installed it lands on npu:0 by
itself and trains a small Llama with the CPU run's losses in fp32 and bf16, with activation
checkpointing and with SDPA; fp16 runs torch_npu's GradScaler; the flash_attention_2 npu path trains;
`torchrun --nproc-per-node 2` gives DDP over hccl with the losses of two CPU processes; a run resumed
from a checkpoint ends where an uninterrupted run ends; torch_compile=True (inductor) trains as compiled
on the CPU."""

import atexit
import functools
import json
import os
import shutil
import sys
import tempfile

import pytest

pytest.importorskip("transformers", reason="transformers is not installed (make test installs it)")

from subprocess_helpers import checked, client_env, run  # noqa: E402

LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "trainer_loop.py")
TORCHRUN = (sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2")
_RUNS = tempfile.mkdtemp(prefix="vnpu-trainer-")
atexit.register(shutil.rmtree, _RUNS, True)


@functools.cache
def trainer(*args, launcher=(sys.executable,)):
    """The per-rank results of one Trainer run (runs shared by several tests are made once)."""
    out = os.path.join(_RUNS, str(abs(hash((args, launcher)))))
    shutil.rmtree(out, ignore_errors=True)
    checked(run([*launcher, LOOP, "--out", out, *args], client_env(), timeout=400, cwd=_RUNS))
    return [json.load(open(os.path.join(out, name))) for name in sorted(os.listdir(out)) if name.endswith(".json")]


def same_training(a, b):
    assert a["losses"] == b["losses"]
    assert a["params"] == b["params"]


def test_transformers_sees_torch_npu_and_trainer_picks_npu():
    from subprocess_helpers import run_python

    proc = run_python("""
        import transformers
        from transformers.utils import is_torch_npu_available
        args = transformers.TrainingArguments(output_dir="unused", report_to=[])
        print(is_torch_npu_available(), args.device)
    """)
    assert proc.stdout.split() == ["True", "npu:0"]


@pytest.mark.parametrize(
    "options",
    [(), ("--bf16",), ("--gradient-checkpointing",), ("--attn", "sdpa"), ("--compile",)],
    ids=["fp32", "bf16", "activation_checkpointing", "sdpa", "torch_compile"],
)
def test_trainer_on_npu_trains_as_on_cpu(options):
    [npu] = trainer(*options)
    [cpu] = trainer(*options, "--cpu")
    assert npu["device"] == "npu:0" and npu["param_device"] == "npu:0" and cpu["device"] == "cpu"
    assert npu["trained_steps"] == [1, 2, 3, 4, 5, 6]
    same_training(npu, cpu)


def test_fp16_trains_with_torch_npus_grad_scaler():
    # The Trainer runs no fp16 on the CPU, so the fp16 run is held against the fp32 CPU run.
    [npu] = trainer("--fp16")
    [cpu] = trainer("--cpu")
    assert npu["scaler"] == "torch_npu.npu.amp.grad_scaler"
    assert npu["losses"] != cpu["losses"]  # fp16 did run
    assert npu["losses"] == pytest.approx(cpu["losses"], rel=2e-3)
    assert sum(map(sum, npu["params"])) == pytest.approx(sum(map(sum, cpu["params"])), rel=1e-3)


def test_flash_attention_2_trains_like_eager_attention_on_cpu():
    # npu_fusion_attention computes attention blockwise: equal up to rounding.
    [npu] = trainer("--attn", "flash_attention_2")
    [cpu] = trainer("--cpu")
    assert npu["losses"] == pytest.approx(cpu["losses"], rel=1e-6)


def test_torchrun_two_ranks_is_ddp_over_hccl_with_the_cpu_losses():
    npu = trainer(launcher=TORCHRUN)
    cpu = trainer("--cpu", launcher=TORCHRUN)
    assert [r["device"] for r in npu] == ["npu:0", "npu:1"]
    assert {r["parallel_mode"] for r in npu} == {"ParallelMode.DISTRIBUTED"} and npu[0]["world_size"] == 2
    for a, b in zip(npu, cpu, strict=True):
        same_training(a, b)
    assert npu[0]["params"] == npu[1]["params"]


def test_resuming_from_a_checkpoint_ends_where_an_uninterrupted_run_ends(tmp_path):
    [straight] = trainer()
    out = str(tmp_path / "run")
    env = client_env()
    checked(run([sys.executable, LOOP, "--out", out, "--save-steps", "3"], env, timeout=400, cwd=str(tmp_path)))
    checkpoint = os.path.join(out, "checkpoints", "checkpoint-3")
    assert os.path.exists(os.path.join(checkpoint, "optimizer.pt"))
    checked(run([sys.executable, LOOP, "--out", out, "--resume", checkpoint], env, timeout=400, cwd=str(tmp_path)))
    resumed = json.load(open(os.path.join(out, "rank0.json")))
    assert resumed["trained_steps"] == [4, 5, 6]
    same_training(resumed, straight)
