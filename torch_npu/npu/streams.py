"""NPU streams and events.

vnpu executes every operator synchronously on the calling thread, so streams never have pending
work: ``query()`` is True and synchronisation returns at once. Streams keep torch_npu's identities
(stream ids encode ``type << 5 | pool index``; priority < 0 selects the high-priority pool) and a
thread-local current stream per device; events record host timestamps, so ``elapsed_time`` is the
real time between two records.
"""

import os
from typing import Any

import torch

import torch_npu
from torch_npu import _C
from torch_npu.npu._capture_guard import refuse_during_capture
from torch_npu.npu.utils import _get_device_index
from torch_npu.utils import _npu_trace
from torch_npu.utils._error_code import ErrCode, pta_error

# torch_npu's Stream(...) keywords besides device and priority.
_STREAM_KWARGS = frozenset({"stream_id", "device_index", "device_type", "stream_ptr", "is_sync_launch"})
_NPU_DEVICE_TYPE = 20  # c10::DeviceType::PrivateUse1
_SYNC_LAUNCH_TYPE = 2


class Stream(torch.Stream):
    """An NPU stream: ``torch.npu.Stream(device=None, priority=0)``, or rebuilt from
    ``(stream_id, device_index, device_type)``."""

    def __new__(cls, device=None, priority=0, **kwargs):
        torch_npu.npu._lazy_init()
        unknown = set(kwargs) - _STREAM_KWARGS
        if unknown:
            raise TypeError(f"Stream() got an unexpected keyword argument '{sorted(unknown)[0]}'")
        if kwargs.get("stream_id") is not None:
            parts = _C._validate_stream(
                kwargs["stream_id"], kwargs.get("device_index", 0), kwargs.get("device_type", _NPU_DEVICE_TYPE)
            )
        elif kwargs.get("stream_ptr"):
            parts = _C._external_stream(_get_device_index(device, optional=True), kwargs["stream_ptr"])
        elif kwargs.get("is_sync_launch"):
            parts = _C._typed_stream(_get_device_index(device, optional=True), _SYNC_LAUNCH_TYPE)
        else:
            parts = _C._pool_stream(_get_device_index(device, optional=True), priority)
        stream_id, index, device_type = parts
        return super().__new__(cls, stream_id=stream_id, device_index=index, device_type=device_type)

    def __init__(self, device=None, priority=0, **kwargs):
        pass

    @property
    def npu_stream(self) -> int:
        """The raw stream handle (an opaque address, stable per stream)."""
        return _C._stream_handle(self.stream_id, self.device_index)

    @property
    def priority(self) -> int:
        return _C._stream_priority(self.stream_id, self.device_index)

    def wait_event(self, event) -> None:
        event.wait(self)

    def wait_stream(self, stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        if event is None:
            event = Event()
        event.record(self)
        return event

    def query(self) -> bool:
        refuse_during_capture("Stream.query()")
        return super().query()

    def synchronize(self) -> None:
        refuse_during_capture("Stream.synchronize()")
        super().synchronize()

    def set_data_preprocess_stream(self, is_data_preprocess_stream: bool = False) -> None:
        """torch_npu marks a stream as the data-preprocessing stream; nothing to do here."""

    def __eq__(self, other):
        if isinstance(other, torch.Stream):
            return (self.stream_id, self.device_index, self.device_type) == (
                other.stream_id,
                other.device_index,
                other.device_type,
            )
        return False

    def __hash__(self):
        return hash((self.stream_id, self.device_index, self.device_type))

    def __repr__(self):
        return f"<torch_npu.npu.Stream device=npu:{self.device_index} npu_stream={self.npu_stream:#x}>"


class Event(torch.Event):
    """An NPU event: ``torch.npu.Event(enable_timing=False, blocking=False, interprocess=False)``."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        self = super().__new__(
            cls, device="npu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess
        )
        self._interprocess = interprocess
        return self

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        pass

    def record(self, stream: torch.Stream | None = None) -> None:
        stream = current_stream() if stream is None else stream
        if self.device.index is not None and self.device.index != stream.device_index:  # bound at its first record
            raise RuntimeError(
                f"Event device {self.device.index} does not match recording stream's device {stream.device_index}."
                + pta_error(ErrCode.PARAM)
            )
        super().record(stream)

    def wait(self, stream: torch.Stream | None = None) -> None:
        super().wait(current_stream() if stream is None else stream)

    def query(self) -> bool:
        refuse_during_capture("Event.query()")
        return super().query()

    def synchronize(self) -> None:
        refuse_during_capture("Event.synchronize()")
        super().synchronize()

    def elapsed_time(self, end_event) -> float:
        """Milliseconds between this event's record and ``end_event``'s (host clock)."""
        if not isinstance(end_event, torch.Event) or end_event.device.type != "npu":
            raise TypeError(f"elapsed_time expects an npu Event, got {type(end_event).__name__}")
        return _C._event_elapsed_ms(self.event_id, end_event.event_id)

    def recorded_time(self):
        """Host time of the last record(), in whole microseconds (vnpu's device runs on the host clock)."""
        return _C._event_recorded_ns(self.event_id) // 1000

    def ipc_handle(self):
        """A handle another process can open with Event.from_ipc_handle (needs interprocess=True)."""
        if not getattr(self, "_interprocess", False):
            raise RuntimeError("Event.ipc_handle needs an event created with interprocess=True")
        return f"vnpu-event:{os.getpid()}:{self.event_id}".encode()

    @classmethod
    def from_ipc_handle(cls, device, handle):
        """The event another process shared, on `device` (an index, "npu:N" or a torch.device; without an index,
        the current device). vnpu devices finish work when it is issued, so the event is complete: it is recorded
        on that device's default stream, query() is True and waiting returns at once."""
        if not isinstance(handle, (bytes, bytearray)) or not bytes(handle).startswith(b"vnpu-event:"):
            raise RuntimeError("from_ipc_handle expects a handle made by Event.ipc_handle()")
        event = cls(interprocess=True)
        event.record(default_stream(_get_device_index(device, optional=True)))
        return event

    def __repr__(self):
        if self.event_id:
            return f"<torch_npu.npu.Event {self.event_id:#x}>"
        return "<torch_npu.npu.Event uninitialized>"


class ExternalEvent:
    """An event for graph-external synchronisation (torch_npu's graph ExternalEvent): record, wait,
    reset. Work is complete when issued, so wait never blocks."""

    def __init__(self):
        self._event = Event()
        self.recorded = False

    def record(self, stream=None):
        self._event.record(stream)
        self.recorded = True

    def wait(self, stream=None):
        self._event.wait(stream)

    def reset(self, stream=None):
        self.recorded = False


class SyncLaunchStream(Stream):
    """A stream whose tasks launch synchronously, from torch_npu's sync-launch pool (stream id type 2,
    4 streams per device)."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs.get("stream_id") is None:
            kwargs["is_sync_launch"] = True
        return super().__new__(cls, device, priority, **kwargs)


class ExternalStream(Stream):
    """A stream created outside PyTorch (``npurt().npuStreamCreate``, another library), wrapped by its
    raw handle; the same handle gives the same stream (stream id type 5)."""

    def __new__(cls, stream_ptr, device=None, **kwargs):
        if not isinstance(stream_ptr, int) or stream_ptr == 0:
            raise ValueError(f"stream_ptr must be a non-zero int handle, but got {stream_ptr!r}")
        return super().__new__(cls, device, stream_ptr=stream_ptr)

    def __init__(self, stream_ptr, device=None, **kwargs):
        pass


def _stream_from_tuple(t) -> Stream:
    return Stream(stream_id=t[0], device_index=t[1], device_type=t[2])


def current_stream(device: Any = None) -> Stream:
    torch_npu.npu._lazy_init()
    return _stream_from_tuple(_C._current_stream(_get_device_index(device, optional=True)))


def default_stream(device: Any = None) -> Stream:
    torch_npu.npu._lazy_init()
    return _stream_from_tuple(_C._default_stream(_get_device_index(device, optional=True)))


def set_stream(stream: torch.Stream | None) -> None:
    if stream is None:
        return
    torch_npu.npu._lazy_init()
    torch._C._accelerator_setStream(stream)


class StreamContext:
    """Selects a stream (and its device) for the duration of a ``with`` block."""

    def __init__(self, stream_ctx: torch.Stream | None):
        stream = stream_ctx
        self.stream = stream
        self.idx = _get_device_index(None, optional=True) if stream is not None else -1
        self.src_prev_stream = None
        self.dst_prev_stream = None

    def __enter__(self):
        stream = self.stream
        if stream is None or self.idx == -1:
            return
        self.src_prev_stream = current_stream(None)
        if self.src_prev_stream.device_index != stream.device_index:
            with torch_npu.npu.device(stream.device_index):
                self.dst_prev_stream = current_stream(stream.device_index)
        set_stream(stream)

    def __exit__(self, type, value, traceback):
        if self.stream is None or self.idx == -1:
            return
        if self.dst_prev_stream is not None:
            set_stream(self.dst_prev_stream)
        set_stream(self.src_prev_stream)


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)


def erase_stream(tensor: torch.Tensor, stream: Stream) -> None:
    """Undo tensor.record_stream(stream) (torch_npu.erase_stream). Operators complete when they return, so
    a block is never in use by another stream when freed and the allocator keeps no record to drop; the
    sanitizer, which models the card, drops its record. The arguments are checked as record_stream checks them."""
    if not isinstance(tensor, torch.Tensor) or tensor.device.type != "npu":
        raise TypeError(f"erase_stream expects an npu tensor, got {type(tensor).__name__}")
    if not isinstance(stream, torch.Stream) or stream.device != tensor.device:
        raise RuntimeError(
            f"erase_stream: the stream is on {getattr(stream, 'device', stream)} but the tensor is on {tensor.device}"
        )
    erased = _npu_trace.NPUEraseStreamCallbacks
    if erased.callback_list:  # the sanitizer, which models the card, where the record is dropped
        erased.fire_callbacks(
            tensor.untyped_storage().data_ptr(), _C._stream_handle(stream.stream_id, stream.device_index)
        )
