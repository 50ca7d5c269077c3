"""PyTorch's own profiler on npu: with ProfilerActivity.PrivateUse1 the kineto plugin adds every npu operator
as a device kernel whose time is attributed to the host operator that issued it; the legacy profiler
with use_device="npu" gets npu times from the marker stubs."""

import json

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile


def test_kineto_shows_npu_kernels_with_device_time_attributed_to_their_operators(tmp_path):
    a = torch.randn(64, 64, device="npu")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        (a @ a).relu()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    assert [k.name for k in kernels] == ["mm", "relu"]
    averages = {e.key: e for e in prof.key_averages()}
    mm_us = sum(k.time_range.elapsed_us() for k in kernels if k.name == "mm")
    assert mm_us > 0 and averages["aten::mm"].self_device_time_total == mm_us
    assert averages["aten::matmul"].self_device_time_total == 0 and averages["aten::matmul"].device_time_total == mm_us
    assert "Self NPU" in prof.key_averages().table(row_limit=5)
    host = {e.name: e for e in prof.events() if e.device_type == DeviceType.CPU}
    for k in kernels:  # inside the host operator that issued it
        op = host["aten::" + k.name]
        assert op.time_range.start <= k.time_range.start and k.time_range.end <= op.time_range.end
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    kernel_events = [e for e in trace if e.get("cat") == "kernel"]
    assert [e["name"] for e in kernel_events] == ["mm", "relu"]
    # as torch_npu's mspti backend: the kernel's task type and stream, a launch on the operator's thread, and an ac2g
    # flow from the launch to the kernel whose id is the operator's External id
    assert [(e["args"]["type"], e["args"]["streamId"]) for e in kernel_events] == [
        ("KERNEL_AICORE", 0),
        ("KERNEL_AIVEC", 0),
    ]
    ops = {e["name"]: e for e in trace if e.get("cat") == "cpu_op"}
    launches = [e for e in trace if e.get("name") in ("aclnnMm", "aclnnRelu")]
    assert [(e["name"], e["tid"]) for e in launches] == [
        ("aclnnMm", ops["aten::mm"]["tid"]),
        ("aclnnRelu", ops["aten::relu"]["tid"]),
    ]
    flows = [e for e in trace if e.get("cat") == "ac2g"]
    starts = {e["id"]: e for e in flows if e["ph"] == "s"}
    ends = {e["id"]: e for e in flows if e["ph"] == "f"}
    assert (
        set(starts) == set(ends) == {ops["aten::mm"]["args"]["External id"], ops["aten::relu"]["args"]["External id"]}
    )
    assert {e["pid"] for e in ends.values()} == {kernel_events[0]["pid"]} != {e["pid"] for e in starts.values()}


def test_without_the_device_activity_no_kernels_are_added():
    a = torch.randn(8, 8, device="npu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        a @ a
    assert not [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    assert {e.key for e in prof.key_averages()} >= {"aten::mm"}


def test_legacy_profiler_with_use_device_npu_reports_npu_time():
    a = torch.randn(64, 64, device="npu")
    with torch.autograd.profiler.profile(use_device="npu", use_kineto=False) as prof:
        a @ a
    averages = {e.key: e for e in prof.key_averages()}
    mm = averages["aten::mm"]
    assert 0 < mm.self_device_time_total <= mm.device_time_total <= averages["aten::matmul"].device_time_total
    assert "NPU total" in prof.key_averages().table(row_limit=3)
