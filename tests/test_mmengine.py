"""mmengine (OpenMMLab's training engine) on npu: its Runner finds torch_npu's devices by itself, trains on
npu:0 with the CPU run's losses and parameters, its AmpOptimWrapper scales the loss with torch_npu's GradScaler,
and torch_npu's optimizers (registered by mmengine from torch_npu.optim) are usable by name in a config."""

import os
import sys

from subprocess_helpers import run_client, skip_unless_installed

skip_unless_installed("mmengine", "mmengine is not installed (make test installs it)")


LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "mmengine_loop.py")


def fit(once, runs, cpu=False):
    """{run: [the run's results]} of one process making `runs` in order, made once per test run."""
    command = [sys.executable, LOOP, *(["--cpu"] if cpu else []), "--out"]
    return once(("mmengine", runs, cpu), lambda: run_client(lambda out: [*command, out], runs))


NPU_RUNS = ("sgd", "amp_fp16", "npu_fused_adamw")
CPU_RUNS = ("sgd", "adamw")


def test_the_runner_trains_on_npu_as_on_the_cpu(once):
    npu = fit(once, NPU_RUNS)["sgd"][0]
    cpu = fit(once, CPU_RUNS, cpu=True)["sgd"][0]
    assert (npu["device"], npu["parameter_device"]) == ("npu", "npu:0")
    assert (cpu["device"], cpu["parameter_device"]) == ("cpu", "cpu")
    assert len(npu["losses"]) == 8 and npu["losses"] == cpu["losses"]
    assert npu["params"] == cpu["params"] and npu["buffers"] == cpu["buffers"]  # BatchNorm's running statistics too


def test_npu_fused_adamw_by_name_trains_as_torch_adamw_on_the_cpu(once):
    npu = fit(once, NPU_RUNS)["npu_fused_adamw"][0]
    cpu = fit(once, CPU_RUNS, cpu=True)["adamw"][0]
    assert npu["losses"] == cpu["losses"] and npu["params"] == cpu["params"]


def test_amp_optim_wrapper_scales_with_torch_npus_grad_scaler(once):
    amp = fit(once, NPU_RUNS)["amp_fp16"][0]
    fp32 = fit(once, NPU_RUNS)["sgd"][0]
    assert amp["scaler"] == "torch_npu.npu.amp.grad_scaler.GradScaler"
    assert amp["losses"] != fp32["losses"]  # the convolution and the linear layer ran in fp16
    assert len(amp["losses"]) == len(fp32["losses"]) == 8
    assert all(abs(a - b) < 1e-2 for a, b in zip(amp["losses"], fp32["losses"]))
