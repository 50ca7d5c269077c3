"""OOM_SNAPSHOT_ENABLE / OOM_SNAPSHOT_PATH and torch_npu._C._npu_saveDevMemUsageInfo, each in a fresh interpreter
(the variables are read when the device is initialised)."""

import re

import pytest
from subprocess_helpers import run_python

import torch_npu

_OOM = """
import glob, os, pickle, torch, torch_npu
kept = torch.ones(1000, device="npu")
try:
    torch.empty(1 << 45, dtype=torch.uint8, device="npu")
except torch.OutOfMemoryError as err:
    print("OOM raised")
except RuntimeError as err:
    print("ERROR", str(err).splitlines()[0])
for name in sorted(os.listdir({path!r})):
    print("FILE", name)
    if name.endswith(".pickle"):
        snapshot = pickle.load(open(os.path.join({path!r}, name), "rb"))
        print("ACTIONS", [entry["action"] for entry in snapshot["device_traces"][0]])
        print("FRAMES", any(block.get("frames") for seg in snapshot["segments"] for block in seg["blocks"]))
"""


def _run(tmp_path, enable, path=None):
    env = {"OOM_SNAPSHOT_ENABLE": enable, "OOM_SNAPSHOT_PATH": str(path or tmp_path)}
    return run_python(_OOM.format(path=str(tmp_path)), env=env).stdout.splitlines()


def test_level_one_records_every_event_and_dumps_a_snapshot_before_the_oom(tmp_path):
    out = _run(tmp_path, "1")
    assert out[0] == "OOM raised"
    (name,) = [line.split()[1] for line in out if line.startswith("FILE")]
    assert re.fullmatch(r"oom_snapshot_\d+_\d{14}\.pickle", name), name
    actions = eval(next(line for line in out if line.startswith("ACTIONS"))[len("ACTIONS ") :])
    assert actions[-1] == "oom" and "alloc" in actions, actions
    assert "FRAMES True" in out


def test_level_two_records_the_state_only(tmp_path):
    out = _run(tmp_path, "2")
    assert out[0] == "OOM raised" and "ACTIONS []" in out and "FRAMES True" in out, out


def test_without_the_variable_nothing_is_written(tmp_path):
    assert _run(tmp_path, "0") == ["OOM raised"]


def test_a_missing_snapshot_directory_replaces_the_oom_with_torch_npus_error(tmp_path):
    out = _run(tmp_path, "1", path=tmp_path / "missing")
    assert out == ["ERROR `OOM_SNAPSHOT_PATH` is invalid."], out


def test_device_memory_usage_file_holds_the_allocators_current_and_peak_memory(tmp_path):
    out = run_python(
        """
        import glob, torch, torch_npu
        a = torch.empty(30 << 20, dtype=torch.uint8, device="npu")
        b = torch.empty(50 << 20, dtype=torch.uint8, device="npu")
        del b
        torch.npu.empty_cache()
        print(torch_npu._C._npu_saveDevMemUsageInfo(0), torch.npu.memory_reserved(), torch.npu.max_memory_reserved())
        (name,) = glob.glob(f"{torch_npu.npu._oom_snapshot._dump_directory()}/device_0_memUsageInfo_*.csv")
        print(open(name).read())
        """,
        env={"OOM_SNAPSHOT_PATH": str(tmp_path)},
    ).stdout.splitlines()
    saved, current, peak = out[0].split()
    assert saved == "True"
    assert out[1] == "moduleName,curMemSize(MB),memPeakSize(MB)"
    assert out[2] == f"caching allocator,{int(current) / 2**20:.4f},{int(peak) / 2**20:.4f}"
    assert int(peak) > int(current) > 0


def test_device_memory_usage_refuses_a_device_that_is_not_an_int():
    with pytest.raises(RuntimeError) as err:
        torch_npu._C._npu_saveDevMemUsageInfo("0")
    assert str(err.value).startswith("invalid argument to save device mem usage info.")
    assert "ERR00001 PTA invalid parameter" in str(err.value)


def test_run_yet_flag_makes_the_next_factory_initialise_the_device_again():
    out = run_python(
        """
        import torch, torch_npu
        torch.empty(1, device="npu")
        calls = []
        original = torch.npu._lazy_init
        torch.npu._lazy_init = lambda: (calls.append(1), original())[1]
        torch.empty(1, device="npu")
        print(len(calls))
        torch_npu._C._npu_set_run_yet_variable_to_false()
        torch.empty(1, device="npu")
        torch.empty(1, device="npu")
        print(len(calls))
        """
    ).stdout.split()
    assert out == ["0", "1"]
