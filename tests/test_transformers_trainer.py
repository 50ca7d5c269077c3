"""transformers' Trainer on npu, as its users run it: with torch_npu installed it lands on npu:0 by
itself and trains a small Llama with the CPU run's losses in fp32 and bf16, with activation
checkpointing and with SDPA; fp16 runs torch_npu's GradScaler; the flash_attention_2 npu path trains;
`torchrun --nproc-per-node 2` gives DDP over hccl with the losses of two CPU processes; a run resumed
from a checkpoint ends where an uninterrupted run ends; torch_compile=True (inductor) trains as compiled
on the CPU."""

import json
import os
import sys

import pytest
from subprocess_helpers import checked, client_env, run, run_client, skip_unless_installed

skip_unless_installed("transformers", "transformers is not installed (make test installs it)")


LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "trainer_loop.py")
TORCHRUN = (sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2")

# One process trains every run of a device (transformers' import costs more than a run); this file's tests share them.
CPU_RUNS = ("fp32", "bf16", "activation_checkpointing", "sdpa", "torch_compile")
NPU_RUNS = (*CPU_RUNS, "fp16", "flash_attention_2")  # the Trainer runs neither on the CPU


def trainer(once, runs=("fp32",), cpu=False, launcher=(sys.executable,)):
    """{run: the per-rank results} of one process (or one launch) training `runs` in order, made once per test run."""
    command = [*launcher, LOOP, *(["--cpu"] if cpu else []), "--out"]
    return once(("trainer", runs, cpu, launcher), lambda: run_client(lambda out: [*command, out], runs))


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


@pytest.mark.long
@pytest.mark.parametrize("name", CPU_RUNS)
def test_trainer_on_npu_trains_as_on_cpu(once, name):
    [npu] = trainer(once, NPU_RUNS)[name]
    [cpu] = trainer(once, CPU_RUNS, cpu=True)[name]
    assert npu["device"] == "npu:0" and npu["param_device"] == "npu:0" and cpu["device"] == "cpu"
    assert npu["trained_steps"] == [1, 2, 3, 4, 5, 6]
    same_training(npu, cpu)


def test_fp16_trains_with_torch_npus_grad_scaler(once):
    # The Trainer runs no fp16 on the CPU, so the fp16 run is held against the fp32 CPU run.
    [npu] = trainer(once, NPU_RUNS)["fp16"]
    [cpu] = trainer(once, CPU_RUNS, cpu=True)["fp32"]
    assert npu["scaler"] == "torch_npu.npu.amp.grad_scaler"
    assert npu["losses"] != cpu["losses"]  # fp16 did run
    assert npu["losses"] == pytest.approx(cpu["losses"], rel=2e-3)
    assert sum(map(sum, npu["params"])) == pytest.approx(sum(map(sum, cpu["params"])), rel=1e-3)


def test_flash_attention_2_trains_like_eager_attention_on_cpu(once):
    # npu_fusion_attention computes attention blockwise: equal up to rounding.
    [npu] = trainer(once, NPU_RUNS)["flash_attention_2"]
    [cpu] = trainer(once, CPU_RUNS, cpu=True)["fp32"]
    assert npu["losses"] == pytest.approx(cpu["losses"], rel=1e-6)


@pytest.mark.long
def test_torchrun_two_ranks_is_ddp_over_hccl_with_the_cpu_losses(once):
    npu = trainer(once, launcher=TORCHRUN)["fp32"]
    cpu = trainer(once, cpu=True, launcher=TORCHRUN)["fp32"]
    assert [r["device"] for r in npu] == ["npu:0", "npu:1"]
    assert {r["parallel_mode"] for r in npu} == {"ParallelMode.DISTRIBUTED"} and npu[0]["world_size"] == 2
    for a, b in zip(npu, cpu, strict=True):
        same_training(a, b)
    assert npu[0]["params"] == npu[1]["params"]


@pytest.mark.long
def test_resuming_from_a_checkpoint_ends_where_an_uninterrupted_run_ends(once, tmp_path):
    [straight] = trainer(once, NPU_RUNS)["fp32"]
    out = str(tmp_path / "run")
    env = client_env()
    checked(run([sys.executable, LOOP, "--out", out, "--save-steps", "3"], env, timeout=400, cwd=str(tmp_path)))
    checkpoint = os.path.join(out, "fp32", "checkpoints", "checkpoint-3")
    assert os.path.exists(os.path.join(checkpoint, "optimizer.pt"))
    checked(run([sys.executable, LOOP, "--out", out, "--resume", checkpoint], env, timeout=400, cwd=str(tmp_path)))
    resumed = json.load(open(os.path.join(out, "fp32", "rank0.json")))
    assert resumed["trained_steps"] == [4, 5, 6]
    same_training(resumed, straight)
