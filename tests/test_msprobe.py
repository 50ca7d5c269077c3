"""Ascend's accuracy tool, msprobe (PyPI mindstudio-probe), run for real on vnpu: PrecisionDebugger dumps of
a model on npu and on the CPU that `msprobe compare` lines up API by API, npu operators whose backward
dumps as one API, L2 (kernel) dumps per step, and `msprobe acc_check`. Each run is a fresh process
(msprobe keeps process-wide state)."""

import csv
import glob
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("msprobe") is None,
    reason="mindstudio-probe is not installed (pip install mindstudio-probe)",
)
MSPROBE = os.path.join(os.path.dirname(sys.executable), "msprobe")

DUMP_MODEL = """
import json, sys, torch, torch_npu
from msprobe.pytorch import PrecisionDebugger
out, device, level, task = sys.argv[1:5]
config = {{"task": task, "dump_path": out, "rank": [], "step": [], "level": level,
          task: {{"scope": [], "list": {api_list}, "data_mode": ["all"]}}}}
json.dump(config, open(out + ".json", "w"))
debugger = PrecisionDebugger(config_path=out + ".json")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(device)
for step in range({steps}):
    x = torch.randn(8, 16).to(device)
    debugger.start(model)
    {body}
    debugger.stop()
    debugger.step()
"""


def _python(code, *args, cwd):
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _msprobe(*args, cwd):
    done = subprocess.run([MSPROBE, *args], capture_output=True, text=True, timeout=600, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _dump(tmp_path, name, device, level, task, steps=1, api_list="[]", body="model(x).sum().backward()"):
    out = str(tmp_path / name)
    code = DUMP_MODEL.format(steps=steps, api_list=api_list, body=body)
    log = _python(code, out, device, level, task, cwd=tmp_path)
    return out, log


@pytest.fixture(scope="module")
def model_dumps(tmp_path_factory, once):
    """Dumps of the model, made once per run and (device, level, task): (dump dir, log); the tests only read them."""
    root = tmp_path_factory.mktemp("msprobe")

    def dump(device, level, task):
        key = (device, level, task)
        return tuple(once(("msprobe dump", *key), lambda: _dump(root, "_".join(key), device, level, task)))

    return dump


def test_importing_msprobe_enables_its_torch_npu_pickle_compatibility(model_dumps):
    _, log = model_dumps("npu", "mix", "statistics")  # the dump imported msprobe.pytorch after torch_npu
    assert "pickle compatibility failed" not in log


@pytest.mark.parametrize("level,task", [("L0", "statistics"), ("L1", "tensor"), ("mix", "statistics")])
def test_npu_and_cpu_dumps_line_up_and_compare_passes(model_dumps, tmp_path, level, task):
    npu, _ = model_dumps("npu", level, task)
    cpu, _ = model_dumps("cpu", level, task)
    _msprobe("compare", "-tp", os.path.join(npu, "step0"), "-gp", os.path.join(cpu, "step0"), "-o", "out", cwd=tmp_path)
    (result,) = glob.glob(str(tmp_path / "out" / "compare_result_*.csv"))
    rows = list(csv.DictReader(open(result, encoding="utf-8-sig")))
    assert rows and all(r["NPU Name"] == r["Bench Name"] for r in rows)
    assert {r["Result"] for r in rows} == {"pass"}, [(r["NPU Name"], r["Result"], r["Err_message"]) for r in rows]


def test_an_npu_operators_backward_dumps_as_one_api(tmp_path):
    body = "y = torch_npu.npu_rms_norm(x.requires_grad_(), model[0].weight[0, :16].detach().requires_grad_())[0]; y.sum().backward()"
    out, _ = _dump(tmp_path, "rms", "npu", "L1", "statistics", body=body)
    (dump,) = glob.glob(os.path.join(out, "step0", "*", "dump.json"))
    names = list(json.load(open(dump))["data"])
    assert "NPU.npu_rms_norm.0.forward" in names and "NPU.npu_rms_norm.0.backward" in names
    assert not [n for n in names if n.startswith(("Tensor.pow", "Tensor.mean", "Torch.rsqrt", "Tensor.__mul__"))]


def test_l2_dumps_of_three_steps_go_to_three_step_folders(tmp_path):
    out, _ = _dump(tmp_path, "l2", "npu", "L2", "tensor", steps=3, api_list='["Functional.linear.0.forward"]')
    for step in range(3):
        dumped = glob.glob(os.path.join(out, f"step{step}", "*", "*", "*aten::addmm.output.0.npy"))
        assert len(dumped) == 1, (step, os.listdir(os.path.join(out, f"step{step}")))


def test_acc_check_runs_the_dumped_apis(model_dumps, tmp_path):
    out, _ = model_dumps("npu", "mix", "statistics")
    (dump,) = glob.glob(os.path.join(out, "step0", "*", "dump.json"))
    os.makedirs(tmp_path / "acc")
    _msprobe("acc_check", "-api_info", dump, "-o", str(tmp_path / "acc"), cwd=tmp_path)
    (result,) = glob.glob(str(tmp_path / "acc" / "accuracy_checking_result_*.csv"))
    rows = list(csv.DictReader(open(result, encoding="utf-8-sig")))
    assert {r["API name"] for r in rows} >= {"Functional.linear.0", "Functional.gelu.0"}
    assert {r["Forward Test Success"] for r in rows} == {"pass"}
