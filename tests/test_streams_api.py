"""Stream and event kinds beyond the basic pool: sync-launch and external streams, external events,
event timestamps and IPC handles."""

import time

import pytest
import torch
from error_cases import raises_exactly


def test_sync_launch_stream_has_its_own_id_type():
    s = torch.npu.SyncLaunchStream()
    assert isinstance(s, torch.npu.Stream)
    assert (s.stream_id >> 5) & 0x7 == 2 and (torch.npu.Stream().stream_id >> 5) & 0x7 != 2
    with torch.npu.stream(s):
        assert torch.npu.current_stream() == s
        y = torch.ones(3, device="npu") * 2
    assert torch.equal(y.cpu(), torch.full((3,), 2.0))
    assert s.query() is True


def test_external_stream_wraps_a_handle():
    s = torch.npu.ExternalStream(0xABC0)
    assert s.npu_stream == 0xABC0 and (s.stream_id >> 5) & 0x7 == 5
    assert torch.npu.ExternalStream(0xABC0).stream_id == s.stream_id
    assert torch.npu.ExternalStream(0xDEF0).stream_id != s.stream_id
    with torch.npu.stream(s):
        assert torch.npu.current_stream().stream_id == s.stream_id
    with pytest.raises(ValueError, match="stream_ptr"):
        torch.npu.ExternalStream(0)


def test_external_event_record_wait_reset():
    e = torch.npu.ExternalEvent()
    assert e.recorded is False
    e.record()
    assert e.recorded is True
    e.wait(torch.npu.Stream())
    e.reset()
    assert e.recorded is False


def test_event_recorded_time_is_host_microseconds():
    a, b = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    a.record()
    time.sleep(0.02)
    b.record()
    assert type(a.recorded_time()) is int  # whole microseconds, as torch_npu returns
    gap_us = b.recorded_time() - a.recorded_time()
    assert 15000 <= gap_us <= 2_000_000
    assert a.elapsed_time(b) == pytest.approx(gap_us / 1000.0, rel=0.01)


def test_event_ipc_handle_needs_interprocess_and_round_trips():
    with pytest.raises(RuntimeError, match="interprocess=True"):
        torch.npu.Event().ipc_handle()
    e = torch.npu.Event(interprocess=True)
    e.record()
    handle = e.ipc_handle()
    opened = torch.npu.Event.from_ipc_handle(0, handle)
    assert opened.query() is True
    with pytest.raises(RuntimeError):
        torch.npu.Event.from_ipc_handle(0, b"garbage")


def test_stream_context_accepts_none():
    before = torch.npu.current_stream()
    with torch.npu.StreamContext(None):
        assert torch.npu.current_stream() == before


# Bad input: the exact first line of the error (torch_npu's "[ERROR] ... ERRxxyyy" suffix follows it)
STREAM_ERRORS = [
    (
        lambda: torch.npu.Event(enable_timing=True).elapsed_time(3),
        TypeError,
        "elapsed_time expects an npu Event, got int",
    ),
    (
        lambda: torch.npu.Event().ipc_handle(),
        RuntimeError,
        "Event.ipc_handle needs an event created with interprocess=True",
    ),
    (
        lambda: torch.npu.Event.from_ipc_handle(0, b"x"),
        RuntimeError,
        "from_ipc_handle expects a handle made by Event.ipc_handle()",
    ),
    (lambda: torch.npu.ExternalStream(0), ValueError, "stream_ptr must be a non-zero int handle, but got 0"),
    (lambda: torch.npu.mstx.mark(1), TypeError, "mstx message must be a str, but got int"),
    (lambda: torch.npu.mstx.range_end(10**9), ValueError, "mstx.range_end: no open range with id 1000000000"),
]


@pytest.mark.parametrize("call,kind,message", STREAM_ERRORS, ids=[c[2][:48] for c in STREAM_ERRORS])
def test_stream_error_message(call, kind, message):
    raises_exactly(call, kind, message)


def test_npurt_creates_raw_streams_for_external_streams():
    rt = torch.npu.npurt()
    handle = rt.npuStreamCreate()
    assert isinstance(handle, int) and handle != 0 and handle != rt.npuStreamCreate()
    external = torch.npu.ExternalStream(handle)
    assert external.npu_stream == handle
    x = torch.ones(3, device="npu")
    with torch.npu.stream(external):
        y = x * 2
    assert torch.equal(y.cpu(), torch.full((3,), 2.0))
    rt.npuStreamDestroy(handle)
    with pytest.raises(RuntimeError, match="not a stream created by npuStreamCreate"):
        rt.npuStreamDestroy(handle)
