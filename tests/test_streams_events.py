"""Streams and events: torch_npu's stream identities, stream contexts, timing events, and the
generic torch.Stream / torch.Event / torch.accelerator API."""

import time

import pytest
import torch


def test_default_and_current_stream():
    assert torch.npu.current_stream() == torch.npu.default_stream()
    assert torch.npu.default_stream().stream_id == 0
    assert torch.npu.default_stream(3).device_index == 3
    assert torch.npu.default_stream(1) != torch.npu.default_stream(2)


def test_stream_ids_encode_type_and_pool_index():
    normal = torch.npu.Stream()
    high = torch.npu.Stream(priority=-1)
    assert normal.stream_id >> 5 == 3 and high.stream_id >> 5 == 4
    assert normal.priority == 0 and high.priority == -1
    ids = {torch.npu.Stream().stream_id & 31 for _ in range(40)}
    assert ids == set(range(32))  # round robin over the 32-stream pool
    assert normal.npu_stream != 0 and normal.npu_stream != high.npu_stream
    rebuilt = torch.npu.Stream(
        stream_id=normal.stream_id, device_index=normal.device_index, device_type=normal.device_type
    )
    assert rebuilt == normal and hash(rebuilt) == hash(normal)
    assert repr(normal).startswith("<torch_npu.npu.Stream device=npu:0 npu_stream=0x")


def test_invalid_stream_id_fails_fast():
    with pytest.raises(RuntimeError, match="Invalid stream id 4095 for npu:0"):
        torch.npu.Stream(stream_id=4095, device_index=0, device_type=20)


def test_stream_context_switches_and_restores():
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        assert torch.npu.current_stream() == s
        y = torch.ones(3, device="npu") * 2
    assert torch.npu.current_stream() == torch.npu.default_stream()
    assert y.cpu().tolist() == [2.0, 2.0, 2.0]
    other = torch.npu.Stream(device=2)
    with torch.npu.stream(other):
        assert torch.npu.current_stream(2) == other
    assert torch.npu.current_stream(2) == torch.npu.default_stream(2)
    with torch.npu.stream(None):
        pass


def test_streams_are_always_idle():
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        torch.randn(100, 100, device="npu") @ torch.randn(100, 100, device="npu")
    assert s.query()
    s.synchronize()
    torch.npu.synchronize()
    torch.npu.synchronize(3)
    s.wait_stream(torch.npu.default_stream())


def test_event_timing_is_real_host_time():
    start = torch.npu.Event(enable_timing=True)
    end = torch.npu.Event(enable_timing=True)
    start.record()
    time.sleep(0.05)
    end.record()
    end.synchronize()
    elapsed = start.elapsed_time(end)
    assert 45 <= elapsed < 2000
    assert end.query()
    assert repr(start).startswith("<torch_npu.npu.Event 0x")
    assert repr(torch.npu.Event()) == "<torch_npu.npu.Event uninitialized>"


def test_event_errors():
    a, b = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    a.record()
    with pytest.raises(RuntimeError) as unrecorded:
        a.elapsed_time(b)
    assert str(unrecorded.value).splitlines()[0] == "Both events must be recorded before calculating elapsed time."
    assert "ERR00005 PTA internal error" in str(unrecorded.value)
    with pytest.raises(RuntimeError) as elsewhere:
        a.record(torch.npu.Stream(device=1))  # an event belongs to the device of its first record
    assert str(elsewhere.value).splitlines()[0] == "Event device 0 does not match recording stream's device 1."
    assert "ERR00001 PTA invalid parameter" in str(elsewhere.value)
    a.record(torch.npu.Stream(device=0))
    c, d = torch.npu.Event(), torch.npu.Event()
    c.record()
    d.record()
    with pytest.raises(ValueError, match="Both events must be created with argument 'enable_timing=True'."):
        c.elapsed_time(d)


def test_stream_record_and_wait_event():
    s = torch.npu.Stream()
    event = s.record_event()
    assert isinstance(event, torch.npu.Event)
    torch.npu.current_stream().wait_event(event)
    event.wait()
    event.synchronize()


def test_record_stream():
    x = torch.ones(4, device="npu")
    x.record_stream(torch.npu.Stream())
    with pytest.raises(RuntimeError, match="record_stream: the stream is on npu:1 but the tensor is on npu:0"):
        x.record_stream(torch.npu.Stream(device=1))


def test_generic_stream_event_and_accelerator_api():
    s = torch.Stream(device="npu")
    assert s.device_type == torch.npu.default_stream().device_type
    with s:
        assert torch.accelerator.current_stream() == s
    e1 = torch.Event(device="npu", enable_timing=True)
    e2 = torch.Event(device="npu", enable_timing=True)
    e1.record()
    time.sleep(0.01)
    e2.record()
    assert e1.elapsed_time(e2) >= 9
    assert torch.accelerator.is_available()
    assert torch.accelerator.device_count() == 8
    torch.accelerator.set_device_index(2)
    assert torch.accelerator.current_device_index() == 2
    torch.accelerator.synchronize()
    torch.accelerator.set_device_index(0)
