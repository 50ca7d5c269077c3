"""torch.npu.Event calls in torch_npu.profiler's trace: while it records, Event.record / wait / query /
elapsed_time / synchronize run in `Event::<method>` ranges (torch_npu's _enable_event_record); outside the
recording the methods are the plain ones."""

import glob
import json
import os

import torch

import torch_npu
from torch_npu.npu import Event
from torch_npu.profiler.profiler_interface import _disable_event_record, _enable_event_record

METHODS = ("record", "wait", "query", "elapsed_time", "synchronize")


def test_event_calls_are_ranges_of_the_trace(tmp_path):
    handler = torch_npu.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="events")
    with torch_npu.profiler.profile(on_trace_ready=handler):
        assert all(hasattr(getattr(Event, name), "origin_func") for name in METHODS)
        start, end = Event(enable_timing=True), Event(enable_timing=True)
        start.record()
        (torch.ones(64, 64, device="npu") @ torch.ones(64, 64, device="npu")).sum()
        end.record()
        end.wait()
        end.synchronize()
        assert end.query()
        assert start.elapsed_time(end) >= 0.0
    assert not any(hasattr(getattr(Event, name), "origin_func") for name in METHODS)
    (session,) = glob.glob(str(tmp_path / "events_*_ascend_pt"))
    with open(os.path.join(session, "ASCEND_PROFILER_OUTPUT", "trace_view.json")) as f:
        names = [e.get("name") for e in json.load(f)]
    for name in METHODS:
        assert f"Event::{name}" in names
    assert names.count("Event::record") == 2


def test_enabling_twice_wraps_once_and_disabling_restores_the_methods():
    plain = {name: getattr(Event, name) for name in METHODS}
    _enable_event_record()
    _enable_event_record()
    try:
        assert all(getattr(Event, name).origin_func is plain[name] for name in METHODS)
    finally:
        _disable_event_record()
    assert all(getattr(Event, name) is plain[name] for name in METHODS)
