"""torch_npu.profiler.profile(execution_trace_observer=...): PyTorch's execution trace observer runs for exactly the
profiler's recording windows and sees the npu operators, with the integral tensor ranges and data PyTorch's
variables ask for."""

import json

import numpy as np
import torch
from torch.profiler import ExecutionTraceObserver

import torch_npu


def observed(path, steps, schedule):
    """Runs steps[i]() in profiler step i under an execution trace observer writing to `path`; returns the names
    of the operator nodes it recorded."""
    et = ExecutionTraceObserver()
    et.register_callback(str(path))
    with torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        schedule=schedule,
        record_shapes=True,
        execution_trace_observer=et,
    ) as prof:
        for step in steps:
            step()
            prof.step()
    et.unregister_callback()
    return json.loads(path.read_text())["nodes"]


def test_the_observer_records_the_npu_operators_of_the_recording_window_only(tmp_path):
    x = torch.arange(12.0, device="npu").reshape(3, 4)
    nodes = observed(
        tmp_path / "et.json",
        [lambda: torch.cos(x), lambda: torch.sin(x), lambda: torch.tan(x)],
        torch_npu.profiler.schedule(wait=1, warmup=0, active=1, repeat=1),
    )
    names = {n["name"] for n in nodes}
    assert "aten::sin" in names
    assert "aten::cos" not in names and "aten::tan" not in names
    (sin,) = [n for n in nodes if n["name"] == "aten::sin"]
    assert sin["inputs"]["shapes"] == [[3, 4]]


def test_integral_tensor_ranges_and_data_are_saved_when_pytorch_is_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("ENABLE_PYTORCH_EXECUTION_TRACE_SAVE_INTEGRAL_TENSOR_RANGE", "1")
    monkeypatch.setenv("ENABLE_PYTORCH_EXECUTION_TRACE_SAVE_INTEGRAL_TENSOR_DATA", "aten::gather")
    x = torch.tensor([[1, 2], [3, 4]], device="npu")
    index = torch.tensor([[0, 0], [1, 0]], device="npu")
    et = ExecutionTraceObserver()
    et.register_callback(str(tmp_path / "et.json"))
    et.set_extra_resource_collection(True)
    with torch_npu.profiler.profile(
        schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=1, repeat=1),
        record_shapes=True,
        execution_trace_observer=et,
    ) as prof:
        torch.gather(x, 1, index)
        prof.step()
    et.unregister_callback()
    (gather,) = [n for n in json.loads((tmp_path / "et.json").read_text())["nodes"] if n["name"] == "aten::gather"]
    assert {a["name"]: a["value"] for a in gather["attrs"]}["tensor_range"] == '{"0":[1,4],"1":[0,1]}'
    dumped = sorted((tmp_path / "et_resources").glob("*.dat"))
    assert [np.fromfile(f, dtype=np.int64).tolist() for f in dumped[:2]] == [[1, 2, 3, 4], [0, 0, 1, 0]]
