"""Stream and event kinds beyond the basic pool: sync-launch and external streams, external events,
event timestamps and IPC handles."""

import contextlib
import ctypes
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from error_cases import raises_exactly

import torch_npu


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


@pytest.mark.parametrize(("device", "index"), [(0, 0), ("npu:1", 1), (torch.device("npu", 1), 1), (None, 0)])
def test_an_event_opened_from_a_handle_is_on_the_device_given(device, index):
    e = torch.npu.Event(interprocess=True)
    opened = torch.npu.Event.from_ipc_handle(device, e.ipc_handle())
    assert opened.device == torch.device("npu", index) and opened.query() is True
    opened.synchronize()


def test_an_event_sent_to_a_spawned_process_arrives_on_its_device(tmp_path):
    script = tmp_path / "send_event.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch, torch_npu
            import torch.multiprocessing as mp

            def child(q):
                ev = q.get()
                print("child", ev.device, ev.query(), flush=True)

            if __name__ == "__main__":
                ctx = mp.get_context("spawn")
                q = ctx.Queue()
                p = ctx.Process(target=child, args=(q,))
                p.start()
                torch.npu.set_device(1)
                ev = torch.npu.Event(interprocess=True)
                ev.record(torch.npu.Stream())
                q.put(ev)
                p.join(60)
                print("exit", p.exitcode, flush=True)
            """
        )
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["child", "npu:1", "True", "exit", "0"], out.stderr[-2000:]


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
]


@pytest.mark.parametrize("call,kind,message", STREAM_ERRORS, ids=[c[2][:48] for c in STREAM_ERRORS])
def test_stream_error_message(call, kind, message):
    raises_exactly(call, kind, message)


@contextlib.contextmanager
def raw_stream():
    """A raw stream handle from the runtime, destroyed afterwards (as torch_npu's own tests make one)."""
    rt = torch.npu.npurt()
    cell = ctypes.c_void_p(0)
    assert rt.npuStreamCreate(ctypes.addressof(cell)) == 0 and cell.value
    try:
        yield cell.value
    finally:
        assert rt.npuStreamDestroy(cell.value) == 0


def test_npurt_is_one_module_of_runtime_calls_returning_acl_codes():
    rt = torch.npu.npurt()
    assert rt is torch.npu.npurt() is torch_npu._C._npurt
    first, second = ctypes.c_void_p(0), ctypes.c_void_p(0)
    assert rt.npuStreamCreate(ctypes.addressof(first)) == 0 and rt.npuStreamCreate(ctypes.addressof(second)) == 0
    assert first.value and second.value and first.value != second.value
    assert rt.npuStreamDestroy(first.value) == 0
    assert rt.npuStreamDestroy(first.value) == 107000  # ACL_ERROR_RT_PARAM_INVALID: already destroyed
    assert rt.npuStreamDestroy(second.value) == 0
    for null_call in (lambda: rt.npuStreamCreate(0), lambda: rt.npuStreamDestroy(0)):
        assert null_call() == 100000  # ACL_ERROR_INVALID_PARAM


@pytest.mark.parametrize("flags", [0x10000000, 0x2, 0x10000002])
def test_npurt_registers_page_aligned_host_memory(flags):
    rt = torch.npu.npurt()
    page = torch.empty(4096, dtype=torch.uint8).share_memory_()
    assert rt.npuHostRegister(page.data_ptr(), 4096, flags) == 0
    assert rt.npuHostUnregister(page.data_ptr()) == 0
    assert rt.npuHostUnregister(page.data_ptr()) != 0


def test_npurt_host_register_rejects_what_the_runtime_rejects():
    rt = torch.npu.npurt()
    small = torch.ones(20)
    assert rt.npuHostRegister(small.data_ptr(), 80, 0x10000000) == 0  # pinning needs no alignment
    assert rt.npuHostUnregister(small.data_ptr()) == 0
    page = torch.empty(4096, dtype=torch.uint8).share_memory_()
    assert rt.npuHostRegister(page.data_ptr(), 0, 0x10000000) == 100000
    assert rt.npuHostRegister(page.data_ptr(), 100, 0x2) == 100000  # mapping works on whole pages only
    assert rt.npuHostRegister(page.data_ptr(), 4096, 0x4) == 100000  # not a registration flag
    assert rt.npuHostRegister(0, 4096, 0x10000000) == 100000 and rt.npuHostUnregister(0) == 100000


def test_external_stream_of_a_raw_stream_runs_work_and_stays_current():
    with raw_stream() as handle:
        external = torch.npu.ExternalStream(handle)
        assert isinstance(external, torch.npu.Stream) and external.npu_stream == handle
        assert external.device.index == torch.npu.current_device()
        assert torch.npu.ExternalStream(handle) == external
        x = torch.arange(10.0, device="npu")
        with torch.npu.stream(external):
            assert torch.npu.current_stream().npu_stream == handle
            assert torch_npu._C._npu_getCurrentRawStream(torch.npu.current_device()) == handle
            y = x + 1
        torch.npu.synchronize()
        assert torch.equal(y.cpu(), torch.arange(10.0) + 1)


EXTERNAL_STREAM_ERRORS = [
    (
        lambda s: s.synchronize(),
        "External NPU stream is not supported in NPUStream::synchronize. The caller is responsible for "
        "synchronization of external streams.",
    ),
    (
        lambda s: s.query(),
        "Cannot query external NPU stream status. The caller must track stream completion externally.",
    ),
]


@pytest.mark.parametrize("call,message", EXTERNAL_STREAM_ERRORS, ids=["synchronize", "query"])
def test_external_stream_refuses_synchronize_and_query(call, message):
    with raw_stream() as handle:
        with pytest.raises(RuntimeError) as info:
            call(torch.npu.ExternalStream(handle))
    lines = str(info.value).split("\n")
    assert lines[0] == message and "ERR00007 PTA feature not supported" in lines[-1]


def test_destroying_a_raw_stream_frees_its_external_stream_slot():
    with raw_stream() as handle:
        stream_id = torch.npu.ExternalStream(handle).stream_id
    with pytest.raises(RuntimeError, match="no external stream is wrapped in that slot"):
        torch.npu.Stream(stream_id=stream_id, device_index=0, device_type=20)


def test_per_stream_queue_refuses_the_raw_handle_of_an_external_stream():
    script = textwrap.dedent(
        """
        import ctypes, torch_npu
        rt = torch_npu.npu.npurt()
        cell = ctypes.c_void_p(0)
        assert rt.npuStreamCreate(ctypes.addressof(cell)) == 0
        external = torch_npu.npu.ExternalStream(cell.value)
        try:
            external.npu_stream
        except RuntimeError as e:
            print(str(e).split(chr(10))[0])
        """
    )
    env = dict(os.environ, PER_STREAM_QUEUE="1", TASK_QUEUE_ENABLE="1")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip() == "External NPU stream is not supported in NPUStream::stream() with per-stream task queue."
    )


@pytest.mark.parametrize(
    "make",
    [torch.npu.default_stream, torch.npu.Stream, lambda: torch.npu.Stream(is_sync_launch=True)],
    ids=["default", "pool", "sync_launch"],
)
def test_stream_rebuilt_from_its_three_parts_is_the_same_stream(make):
    s1 = make()
    s2 = torch.npu.Stream(stream_id=s1.stream_id, device_index=s1.device_index, device_type=s1.device_type)
    assert s2 == s1 and s2.npu_stream == s1.npu_stream
    s2.synchronize()


def test_is_sync_launch_draws_from_a_pool_of_four():
    ids = {torch.npu.Stream(is_sync_launch=True).stream_id for _ in range(9)}
    assert {i >> 5 for i in ids} == {2} and len(ids) == 4


REBUILD_ERRORS = [
    (
        dict(stream_id=99999, device_index=0, device_type=20),
        "Invalid stream id 99999 for npu:0: it is not a stream "
        "this device created (stream_id encodes type << 5 | pool index)",
    ),
    (
        dict(stream_id=-1, device_index=0, device_type=20),
        "Invalid stream id -1 for npu:0: it is not a stream this "
        "device created (stream_id encodes type << 5 | pool index)",
    ),
    (
        dict(stream_id=(2 << 5) + 4, device_index=0, device_type=20),
        "Invalid stream id 68 for npu:0: it is not a "
        "stream this device created (stream_id encodes type << 5 | pool index)",
    ),
    (
        dict(stream_id=0, device_index=999, device_type=20),
        "Invalid device index 999 for an npu stream: 8 npu " "devices are visible",
    ),
    (
        dict(stream_id=0, device_index=-1, device_type=20),
        "Invalid device index -1 for an npu stream: 8 npu devices " "are visible",
    ),
    (
        dict(stream_id=0, device_index=0, device_type=999),
        "Invalid device type 999 for an npu stream: expected 20 " "(PrivateUse1)",
    ),
    (
        dict(stream_id=0, device_index=0, device_type=-1),
        "Invalid device type -1 for an npu stream: expected 20 " "(PrivateUse1)",
    ),
]


@pytest.mark.parametrize("parts,message", REBUILD_ERRORS, ids=[m[:40] for _, m in REBUILD_ERRORS])
def test_stream_rebuilt_from_invalid_parts_fails_at_construction(parts, message):
    with pytest.raises(RuntimeError) as info:
        torch.npu.Stream(**parts)
    lines = str(info.value).split("\n")
    assert lines[0] == message and "ERR00001 PTA invalid parameter" in lines[-1]


def test_stream_rejects_keywords_torch_npu_does_not_take():
    raises_exactly(lambda: torch.npu.Stream(pool=1), TypeError, "Stream() got an unexpected keyword argument 'pool'")
