"""accelerate on npu, run as its users run it: `Accelerator()` picks npu:0 by itself, the documented
loop (optimizer built before `prepare`) trains with the CPU run's losses in fp32, bf16 and fp16,
with gradient accumulation, on one process and on two (`accelerate launch`, hccl, MULTI_NPU);
save_state/load_state resume exactly; accelerate's own `accelerate test` passes on npu."""

import os
import sys

import pytest
from subprocess_helpers import checked, client_env, free_port, run, run_client, skip_unless_installed

skip_unless_installed("accelerate", "accelerate is not installed (make test installs it)")


LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "accelerate_loop.py")
LAUNCH = (sys.executable, "-m", "accelerate.commands.launch", "--num_machines", "1", "--dynamo_backend", "no")
TORCHRUN = (sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2")
TWO_NPUS = (*LAUNCH, "--num_processes", "2", "--multi_gpu")

# One process (or launch) trains each precision in turn (accelerate's import costs more than a run); tests share them.
NPU_RUNS = ("no", "bf16", "fp16")
CPU_RUNS = ("no", "bf16")  # accelerate runs no fp16 on the CPU


def loop(runs, *args, launcher=(sys.executable,)):
    """{mixed precision: the per-rank results} of one process (or launch) training `runs` in order."""
    if launcher[:3] == LAUNCH[:3]:
        launcher = (*launcher, "--main_process_port", str(free_port()))
    return run_client(lambda out: [*launcher, LOOP, "--out", out, *args], runs, timeout=300)


def shared(once, runs, *args, launcher=(sys.executable,)):
    """loop(...), made once per test run for every test that asks for the same runs."""
    return once(("accelerate", runs, args, launcher), lambda: loop(runs, *args, launcher=launcher))


def same_training(a, b):
    assert a["losses"] == b["losses"]
    assert a["params"] == b["params"]


@pytest.mark.parametrize("precision", CPU_RUNS)
def test_one_process_trains_as_on_cpu(once, precision):
    [npu] = shared(once, NPU_RUNS)[precision]
    [cpu] = shared(once, CPU_RUNS, "--cpu")[precision]
    assert npu["device"] == "npu" and npu["param_device"] == "npu:0"  # "cuda" and cuda:0 on a GPU
    assert npu["distributed_type"] == "DistributedType.NO"
    assert cpu["device"] == "cpu"
    same_training(npu, cpu)
    assert npu["losses"][-1] < npu["losses"][0]


def test_fp16_uses_npu_grad_scaler_and_trains_as_plain_pytorch_on_cpu(once):
    [npu] = shared(once, NPU_RUNS)["fp16"]
    [cpu] = shared(once, ("fp16",), "--plain-cpu")["fp16"]  # accelerate itself runs no fp16 on the CPU
    assert npu["scaler"] == "torch_npu.npu.amp.grad_scaler.GradScaler"
    same_training(npu, cpu)
    assert npu["losses"] != shared(once, NPU_RUNS)["no"][0]["losses"]  # fp16 did run


@pytest.mark.parametrize("precision", CPU_RUNS)
def test_two_process_launch_trains_as_two_cpu_processes(once, precision):
    npu = shared(once, NPU_RUNS, launcher=TWO_NPUS)[precision]
    cpu = shared(once, CPU_RUNS, "--cpu", launcher=TORCHRUN)[precision]
    assert [r["device"] for r in npu] == ["npu:0", "npu:1"]
    assert {r["distributed_type"] for r in npu} == {"DistributedType.MULTI_NPU"}
    assert {r["distributed_type"] for r in cpu} == {"DistributedType.MULTI_CPU"}
    for a, b in zip(npu, cpu, strict=True):
        same_training(a, b)
    assert npu[0]["params"] == npu[1]["params"] and npu[0]["losses"] != npu[1]["losses"]


def test_two_process_fp16_keeps_ranks_in_step(once):
    npu = shared(once, NPU_RUNS, launcher=TWO_NPUS)["fp16"]
    assert [r["scaler"] for r in npu] == ["torch_npu.npu.amp.grad_scaler.GradScaler"] * 2
    assert npu[0]["params"] == npu[1]["params"]
    assert all(loss == loss for r in npu for loss in r["losses"])  # no NaN


def test_save_state_and_load_state_resume_exactly(once, tmp_path):
    [straight] = shared(once, NPU_RUNS)["no"]  # two epochs
    [first] = loop(["no"], "--epochs", "1", "--save", str(tmp_path / "state"))["no"]
    [resumed] = loop(["no"], "--epochs", "1", "--resume", str(tmp_path / "state"))["no"]
    assert os.path.exists(tmp_path / "state" / "optimizer.bin")
    assert first["losses"] + resumed["losses"] == straight["losses"]
    assert resumed["params"] == straight["params"]


def test_accelerate_own_self_check_passes_on_npu(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_NPU\nnum_machines: 1\n"
        "num_processes: 2\nmixed_precision: 'no'\nuse_cpu: false\n"
    )
    proc = checked(
        run(
            [sys.executable, "-m", "accelerate.commands.accelerate_cli", "test", "--config_file", str(config)],
            client_env(),
            timeout=600,
            cwd=str(tmp_path),
        )
    )
    assert "Test is a success! You are ready for your distributed training!" in proc.stdout
    assert "Training yielded the same results on one CPU or distributed setup with batch split." in proc.stdout
