"""Lightning on npu: `Trainer(accelerator="npu")` (torch_npu.contrib.lightning's NPUAccelerator, registered
under "npu") trains a LightningModule on one npu and with DDP over hccl on two, in fp32, bf16-mixed and
16-mixed (torch_npu's GradScaler), with the CPU run's losses; both distributions of Lightning."""

import os
import sys

import pytest
from subprocess_helpers import run_client, run_python, skip_unless_installed

skip_unless_installed("lightning", "Lightning is not installed (make test installs it)")

LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "lightning_loop.py")
# One process makes several runs (Lightning's import costs more than a run); this file's tests share them.
ONE_DEVICE = ("npu:32-true", "cpu:32-true", "npu:bf16-mixed", "cpu:bf16-mixed", "npu:16-mixed")


def fit(once, runs, devices=1, package="lightning.pytorch"):
    """{run: the per-rank results} of one process (with DDP, one launch) making `runs` in order, made once per test
    run."""
    command = [sys.executable, LOOP, "--devices", str(devices), "--package", package, "--out"]
    return once(("lightning", runs, devices, package), lambda: run_client(lambda out: [*command, out], runs))


def same_training(a, b):
    assert a["losses"] == b["losses"]
    assert a["params"] == b["params"]


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
@pytest.mark.parametrize("package", ["lightning.pytorch", "pytorch_lightning"])
def test_one_npu_trains_as_the_cpu(once, precision, package):
    if package == "pytorch_lightning":
        skip_unless_installed("pytorch_lightning", "the standalone pytorch_lightning is not installed")
    runs = fit(once, ONE_DEVICE, package=package)
    [npu], [cpu] = runs[f"npu:{precision}"], runs[f"cpu:{precision}"]
    assert (npu["accelerator"], npu["strategy"], npu["root_device"]) == (
        "NPUAccelerator",
        "SingleDeviceStrategy",
        "npu:0",
    )
    assert npu["param_device"] == npu["batch_device"] == "npu:0"
    assert npu["precision"] == ("NPUMixedPrecision" if precision == "bf16-mixed" else "Precision")
    same_training(npu, cpu)


def test_16_mixed_uses_torch_npus_grad_scaler(once):
    # Lightning runs no fp16 AMP on the CPU (it switches to bf16), so this run is held against fp32.
    runs = fit(once, ONE_DEVICE)
    [npu], [cpu] = runs["npu:16-mixed"], runs["cpu:32-true"]
    assert npu["precision"] == "NPUMixedPrecision" and npu["scaler"] == "torch_npu.npu.amp.grad_scaler"
    assert npu["losses"] != cpu["losses"]
    assert npu["losses"] == pytest.approx(cpu["losses"], rel=2e-3)


@pytest.mark.long
@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_two_npus_train_with_ddp_over_hccl_as_two_cpu_processes(once, precision):
    # One launch per backend (a process has one default process group): both precisions in each.
    npu = fit(once, ("npu:32-true", "npu:bf16-mixed"), devices=2)[f"npu:{precision}"]
    cpu = fit(once, ("cpu:32-true", "cpu:bf16-mixed"), devices=2)[f"cpu:{precision}"]
    assert [(r["strategy"], r["root_device"], r["backend"]) for r in npu] == [
        ("DDPStrategy", "npu:0", "hccl"),
        ("DDPStrategy", "npu:1", "hccl"),
    ]
    for a, b in zip(npu, cpu, strict=True):
        same_training(a, b)
    assert npu[0]["params"] == npu[1]["params"] and npu[0]["losses"] != npu[1]["losses"]


def test_npu_accelerator_is_registered_and_validates_devices():
    proc = run_python(
        """
        import lightning as L
        from lightning.pytorch.accelerators import AcceleratorRegistry
        from torch_npu.contrib.lightning import NPUAccelerator, NPUMixedPrecision
        print("npu" in AcceleratorRegistry.available_accelerators(), AcceleratorRegistry.get("npu").__class__ is NPUAccelerator)
        print(NPUAccelerator.parse_devices("0,2"), NPUAccelerator.get_parallel_devices(2), NPUAccelerator.auto_device_count())
        t = L.Trainer(accelerator=NPUAccelerator(), devices=1, logger=False)
        print(t.strategy.root_device)
        try:
            L.Trainer(accelerator="npu", devices=[9], logger=False)
        except ValueError as e:
            print(e)
    """,
        env={"ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3"},
        timeout=300,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "True True"
    assert lines[1] == "[0, 2] [device(type='npu', index=0), device(type='npu', index=1)] 4"
    assert lines[2] == "npu:0"
    assert lines[3] == (
        "You requested npu:[9] but only 4 npu devices are visible (ASCEND_RT_VISIBLE_DEVICES " "selects them)"
    )
