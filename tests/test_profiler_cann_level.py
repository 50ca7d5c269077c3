"""The CANN level of a Level1 / Level2 profile: the "CANN" process of trace_view.json (a Node@launch per kernel,
linked to it by a HostToDevice flow; the runtime's copies, synchronisations and event calls) and
api_statistic.csv, which sums them."""

import collections
import csv
import glob
import json
import os
import sqlite3

import pytest
import torch
from subprocess_helpers import last_line, run_python

import torch_npu

API_STATISTIC_HEADER = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance"


def _workload():
    x = torch.randn(64, 64).npu()  # a blocking copy to the device
    y = (x @ x).relu()
    y.sum().item()  # reads a scalar back: waits for the stream
    y.cpu()  # a blocking copy to the host
    y.to("cpu", non_blocking=True)  # does not wait
    side = torch.npu.Stream()
    event = torch.npu.Event()
    event.record()
    side.wait_event(event)
    torch.npu.synchronize()


def _profile(root, level, export_type=torch_npu.profiler.ExportType.Text):
    config = torch_npu.profiler._ExperimentalConfig(profiler_level=level, export_type=export_type)
    with torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        experimental_config=config,
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(root)),
    ):
        _workload()
    (session,) = glob.glob(os.path.join(root, "*_ascend_pt"))
    return os.path.join(session, "ASCEND_PROFILER_OUTPUT")


@pytest.fixture(scope="module")
def level1(tmp_path_factory):
    return _profile(tmp_path_factory.mktemp("level1"), torch_npu.profiler.ProfilerLevel.Level1)


def _trace(out):
    with open(os.path.join(out, "trace_view.json")) as f:
        return json.load(f)


def _pid_of(events, name):
    (pid,) = [e["pid"] for e in events if e.get("name") == "process_name" and e["args"]["name"] == name]
    return pid


def test_every_kernel_is_launched_from_the_cann_level_and_linked_to_it(level1):
    events = _trace(level1)
    cann, hardware = _pid_of(events, "CANN"), _pid_of(events, "Ascend Hardware")
    kernels = {(e["tid"], e["ts"]) for e in events if e["ph"] == "X" and e["pid"] == hardware}
    launches = [e for e in events if e["ph"] == "X" and e["pid"] == cann and e["name"] == "Node@launch"]
    copies = [e for e in events if e["ph"] == "X" and e["pid"] == cann and e["name"] == "AscendCL@aclrtMemcpyAsync"]
    assert len(copies) == 3  # to the device, to the host, non-blocking to the host
    assert len(launches) + len(copies) == len(kernels)
    starts = {e["id"]: e for e in events if e["ph"] == "s" and e["name"] == "HostToDevice"}
    ends = {e["id"]: e for e in events if e["ph"] == "f" and e["name"] == "HostToDevice"}
    assert starts.keys() == ends.keys() and len(starts) == len(kernels)
    assert {(e["tid"], e["ts"]) for e in ends.values()} == kernels
    assert all(e["pid"] == hardware and e["cat"] == "HostToDevice" for e in ends.values())
    assert {(e["tid"], e["ts"]) for e in starts.values()} == {(e["tid"], e["ts"]) for e in launches + copies}


def test_the_runtimes_waits_and_event_calls_are_at_the_acl_level(level1):
    events = _trace(level1)
    cann = _pid_of(events, "CANN")
    names = collections.Counter(e["name"] for e in events if e["ph"] == "X" and e["pid"] == cann)
    # .npu(), .item() and .cpu() wait for the stream; the non-blocking copy does not
    assert names["AscendCL@aclrtSynchronizeStream"] == 3
    assert names["AscendCL@aclrtSynchronizeDevice"] == 1
    assert names["AscendCL@aclrtRecordEvent"] == 1 and names["AscendCL@aclrtStreamWaitEvent"] == 1
    assert names["AscendCL@aclrtCreateStreamWithConfig"] + names["AscendCL@aclrtCreateEventWithFlag"] >= 1
    lanes = {e["args"]["name"] for e in events if e["pid"] == cann and e.get("name") == "thread_name"}
    assert lanes and all(lane.startswith("Thread ") for lane in lanes)


def test_api_statistic_sums_the_cann_level(level1):
    events = _trace(level1)
    cann = _pid_of(events, "CANN")
    durations = collections.defaultdict(list)
    for e in events:
        if e["ph"] == "X" and e["pid"] == cann:
            level, api = e["name"].split("@")
            durations[({"AscendCL": "acl", "Node": "node"}[level], api)].append(e["dur"])
    with open(os.path.join(level1, "api_statistic.csv")) as f:
        header, *rows = list(csv.reader(f))
    assert ",".join(header) == API_STATISTIC_HEADER
    assert {(r[1], r[2]): int(r[4]) for r in rows} == {k: len(v) for k, v in durations.items()}
    for device, level, api, total, _count, mean, low, high, variance in rows:
        d = durations[(level, api)]
        assert device == "0"
        assert float(total) == pytest.approx(sum(d), abs=0.01)
        assert float(low) <= float(mean) <= float(high) and float(variance) >= 0
    assert [float(r[3]) for r in rows] == sorted((float(r[3]) for r in rows), reverse=True)


def test_level0_has_no_cann_level(tmp_path):
    out = _profile(tmp_path, torch_npu.profiler.ProfilerLevel.Level0)
    assert not os.path.exists(os.path.join(out, "api_statistic.csv"))
    assert "CANN" not in {e["args"]["name"] for e in _trace(out) if e.get("name") == "process_name"}


def test_the_database_holds_the_runtime_calls(tmp_path):
    out = _profile(tmp_path, torch_npu.profiler.ProfilerLevel.Level1, torch_npu.profiler.ExportType.Db)
    (db,) = glob.glob(os.path.join(out, "ascend_pytorch_profiler*.db"))
    with sqlite3.connect(db) as conn:
        names = collections.Counter(
            name
            for (name,) in conn.execute(
                "SELECT s.value FROM CANN_API a JOIN STRING_IDS s ON a.name = s.id JOIN ENUM_API_TYPE t "
                "ON a.type = t.id WHERE t.name = 'acl'"
            )
        )
    assert names["aclrtSynchronizeStream"] == 3 and names["aclrtSynchronizeDevice"] == 1


LAUNCH_BLOCKING = """
    import collections, glob, json, os, sys, torch, torch_npu
    config = torch_npu.profiler._ExperimentalConfig(profiler_level=torch_npu.profiler.ProfilerLevel.Level1)
    with torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.NPU], experimental_config=config,
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(sys.argv[1]),
    ):
        x = torch.ones(8, device="npu")
        for _ in range(5):
            x = x * 2 + 1
    (out,) = glob.glob(os.path.join(sys.argv[1], "*_ascend_pt", "ASCEND_PROFILER_OUTPUT"))
    events = json.load(open(os.path.join(out, "trace_view.json")))
    (cann,) = [e["pid"] for e in events if e.get("name") == "process_name" and e["args"]["name"] == "CANN"]
    calls = sorted((e["ts"], e["name"]) for e in events if e["ph"] == "X" and e["pid"] == cann)
    print(json.dumps([name for _, name in calls]))
"""


@pytest.mark.parametrize("blocking", ["0", "1"])
def test_launch_blocking_waits_for_the_stream_after_every_launch(tmp_path, blocking):
    done = run_python(
        LAUNCH_BLOCKING.replace("sys.argv[1]", repr(str(tmp_path))), env={"ASCEND_LAUNCH_BLOCKING": blocking}
    )
    names = json.loads(last_line(done))
    launches = names.count("Node@launch")
    assert launches >= 10
    if blocking == "1":
        assert names == ["Node@launch", "AscendCL@aclrtSynchronizeStream"] * launches
    else:
        assert "AscendCL@aclrtSynchronizeStream" not in names


@pytest.mark.parametrize(
    "read",
    [
        lambda x: x.nonzero(),
        lambda x: x.masked_select(x > 0),
        lambda x: torch.unique(x),
        lambda x: torch.equal(x, x),
        lambda x: x.sum().item(),
        lambda x: x.cpu(),
    ],
    ids=["nonzero", "masked_select", "unique", "equal", "item", "cpu"],
)
def test_operators_whose_result_the_host_reads_wait_for_the_stream_once(read):
    x = torch.tensor([0.0, 1.0, 2.0]).npu()
    torch_npu._C._runtime_api_start()
    read(x)
    calls = torch_npu._C._runtime_api_stop()
    assert [c[0] for c in calls] == ["aclrtSynchronizeStream"]
    assert calls[0][4] == x.device.index and calls[0][1] <= calls[0][2]


def test_operators_that_stay_on_the_device_do_not_wait():
    x = torch.tensor([0.0, 1.0, 2.0]).npu()
    torch_npu._C._runtime_api_start()
    ((x * 2).relu() + x).sum()
    x.to("cpu", non_blocking=True)
    assert torch_npu._C._runtime_api_stop() == []


def test_aligning_the_clocks_moves_the_runtime_calls_and_collectives_with_the_kernels():
    """The host clock (PyTorch's) and the steady clock of the device side differ; the shift that puts each kernel
    inside its host operator applies to every steady-clock record, so a launch and the synchronisation after it
    keep their order (msprof-analyze's advisor pairs them by order)."""
    from torch_npu.profiler import session as session_record

    host = [{"cat": "cpu_op", "name": "aten::add_", "thread": 7, "start_ns": 5_000, "end_ns": 6_000, "correlation": 42}]
    kernel = {"thread": 7, "start_ns": 1_100, "end_ns": 1_300, "correlation": 42, "device": 0}
    record = {
        "host_events": host,
        "activities": [kernel],
        "memory": [],
        "steps": [(0, 1_000, 1_900)],
        "runtime_api": [("aclrtSynchronizeStream", 1_300, 1_310, 7, 0)],
        "collectives": [{"start_ns": 1_400, "end_ns": 1_500}],
    }
    prepared = session_record.prepare(record, align_clocks=True)
    shift = prepared["activities"][0]["start_ns"] - 1_100
    assert shift == 3_900  # the smallest shift that puts the kernel inside aten::add_
    assert prepared["runtime_api"] == [("aclrtSynchronizeStream", 1_300 + shift, 1_310 + shift, 7, 0)]
    assert prepared["collectives"] == [{"start_ns": 1_400 + shift, "end_ns": 1_500 + shift}]
    assert prepared["steps"] == [(0, 1_000 + shift, 1_900 + shift)]
