"""The profiler's device-activity source: npu operators recorded in C++ with their own timestamps,
device, stream, shapes, dtypes and private formats."""

import torch

import torch_npu
from torch_npu import _C


def _record(fn, record_shapes=True):
    _C._activity_start(record_shapes)
    try:
        fn()
    finally:
        activities = _C._activity_stop()
    return activities


def test_operators_are_recorded_in_order_with_their_timestamps_device_and_stream():
    a = torch.randn(8, 8, device="npu")
    b = torch.randn(8, 8, device="npu")
    side = torch.npu.Stream()

    def work():
        c = a @ b
        d = c + 1
        with torch.npu.stream(side):
            d.relu()

    recorded = _record(work)
    names = [r["name"] for r in recorded]
    assert names == ["aten::mm", "aten::add.Tensor", "aten::relu"], names
    assert all(r["end_ns"] >= r["start_ns"] > 0 for r in recorded)
    assert recorded[0]["start_ns"] <= recorded[1]["start_ns"] <= recorded[2]["start_ns"]
    assert {r["device"] for r in recorded} == {0}
    assert recorded[0]["stream"] == torch.npu.current_stream().stream_id
    assert recorded[2]["stream"] == side.stream_id != recorded[0]["stream"]
    assert recorded[0]["inputs"] == [([8, 8], "Float", 2), ([8, 8], "Float", 2)]
    assert recorded[1]["outputs"] == [([8, 8], "Float", 2)]
    assert not any(r["cpu_fallback"] for r in recorded)


def test_private_formats_and_no_shapes_unless_asked():
    x = torch_npu.npu_format_cast(torch.randn(32, 32, device="npu"), 29)
    recorded = _record(lambda: x * 2)
    assert recorded[-1]["inputs"][0] == ([32, 32], "Float", 29)
    plain = _record(lambda: x * 2, record_shapes=False)
    assert plain[-1]["name"] == "aten::mul.Tensor" and plain[-1]["inputs"] == []


def test_recording_stops_cleanly_and_a_new_session_starts_empty():
    assert not _C._activity_recording()
    _C._activity_start(False)
    torch.ones(2, device="npu").sum()
    _C._activity_start(False)  # a new session discards the old one
    assert _C._activity_recording()
    assert _C._activity_stop() == []
    assert not _C._activity_recording() and _C._activity_stop() == []


def test_cpu_fallback_operators_are_marked_with_a_profile(synced):
    from subprocess_helpers import run

    code = (
        "import torch, torch_npu, warnings\nwarnings.simplefilter('ignore')\n"
        "x = torch.randn(4, device='npu')\ntorch_npu._C._activity_start(False)\n"
        "torch.fmax(x, x); x + 1\n"
        "print([(r['name'], r['cpu_fallback']) for r in torch_npu._C._activity_stop()])\n"
    )
    import sys

    done = run([sys.executable, "-c", code], synced)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[('aten::fmax', True), ('aten::add.Tensor', False)]"


def test_operator_totals_count_every_thread_without_python():
    import threading

    a = torch.ones(4, device="npu")
    _C._op_totals_start()
    try:
        a + 1
        worker = threading.Thread(target=lambda: [a * 2 for _ in range(3)])
        worker.start()
        worker.join(timeout=60)
    finally:
        totals = _C._op_totals_stop()
    assert totals["aten::add.Tensor"][0] == 1 and totals["aten::mul.Tensor"][0] == 3
    assert all(ns >= 0 for _, ns in totals.values())
    assert _C._op_totals_stop() == {}  # stopped: nothing more is counted
