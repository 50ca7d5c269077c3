"""mstx: lightweight marks and ranges in npu timelines (torch_npu.npu.mstx).

As in torch_npu, the Python API checks its arguments (a bad message, domain or stream warns and does nothing;
range_start then returns 0; no call raises) and hands valid ones to torch_npu._C._mstx, whose functions here
keep the marks and ranges in this process (``mstx.records()``) for torch_npu.profiler and show them in
torch.profiler traces as record_function events while a profiler runs. range_push / range_pop / annotate /
records are vnpu's additions; mstx_range is also a context manager.
"""

import functools
import itertools
import threading
import time
import warnings
from contextlib import contextmanager

import torch

import torch_npu
from torch_npu.utils.utils import _print_error_log

__all__ = ["mstx", "mark", "range_start", "range_end", "range_push", "range_pop", "mstx_range", "annotate"]

_lock = threading.Lock()
_records = []
_ids = itertools.count(1)
_open = {}  # range id -> (message, domain, start_ns, profiler handle, thread)
_stacks = threading.local()
_MAX_RECORDS = 100000


def _profiler_enter(message):
    if torch.autograd._profiler_enabled():
        return torch.ops.profiler._record_function_enter_new(message, None)
    return None


def _profiler_exit(handle):
    if handle is not None:
        torch.ops.profiler._record_function_exit._RecordFunction(handle)


def _append(record):
    with _lock:
        _records.append(record)
        if len(_records) > _MAX_RECORDS:
            del _records[: len(_records) - _MAX_RECORDS]


# torch_npu._C._mstx: the recording layer (stream: a native stream handle, or None on the host)
def _record_mark(message, stream, domain):
    _append(
        {
            "kind": "mark",
            "message": message,
            "domain": domain,
            "ns": time.monotonic_ns(),
            "stream": stream,
            "thread": threading.get_native_id(),
        }
    )
    _profiler_exit(_profiler_enter(message))


def _record_range_start(message, stream, domain):
    range_id = next(_ids)
    with _lock:
        _open[range_id] = (message, domain, time.monotonic_ns(), _profiler_enter(message), threading.get_native_id())
    return range_id


def _record_range_end(range_id, domain):
    with _lock:
        opened = _open.pop(range_id, None)
    if opened is None:  # not a range this process opened (or already closed): nothing to end, as on the card
        return
    message, opened_domain, start, handle, thread = opened
    _profiler_exit(handle)
    _append(
        {
            "kind": "range",
            "message": message,
            "domain": opened_domain,
            "start_ns": start,
            "end_ns": time.monotonic_ns(),
            "id": range_id,
            "thread": thread,
            "end_thread": threading.get_native_id(),
        }
    )


NATIVE = {
    "_mark": _record_mark,
    "_mark_on_host": lambda message, domain: _record_mark(message, None, domain),
    "_range_start": _record_range_start,
    "_range_start_on_host": lambda message, domain: _record_range_start(message, None, domain),
    "_range_end": _record_range_end,
}


def _no_exception(default=None):
    """torch_npu's mstx never raises into the program: a failure is logged and the call returns `default`."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as error:  # noqa: BLE001  (mstx never raises into the program, as torch_npu's)
                _print_error_log(f"Call {fn.__name__} failed. Exception: {error}")
                return default

        return wrapper

    return decorate


def _valid_text(value, what, func, allow_empty=False):
    if not isinstance(value, str) or not (value or allow_empty):
        warnings.warn(f"Invalid {what} for mstx.{func} func. Please input valid {what} string.")
        return False
    return True


def _stream_handle(stream, func):
    """The native handle of `stream`, None for the host, or False (warned) for anything else."""
    if not stream:
        return None
    if isinstance(stream, torch_npu.npu.Stream):
        return stream.npu_stream
    warnings.warn(f"Invalid stream for mstx.{func} func. Please input valid stream.")
    return False


class mstx:
    @staticmethod
    @_no_exception()
    def mark(message: str, stream=None, domain: str = "default"):
        """An instantaneous mark, on the host or on `stream`."""
        if not _valid_text(message, "message", "mark") or not _valid_text(domain, "domain", "mark", allow_empty=True):
            return
        handle = _stream_handle(stream, "mark")
        if handle is None:
            torch_npu._C._mstx._mark_on_host(message, domain)
        elif handle is not False:
            torch_npu._C._mstx._mark(message, handle, domain)

    @staticmethod
    @_no_exception()
    def range_start(message: str, stream=None, domain: str = "default") -> int:
        """Open a range; returns its id for range_end (ranges may overlap and cross threads), 0 if refused."""
        if not _valid_text(message, "message", "range_start") or not _valid_text(domain, "domain", "range_start"):
            return 0
        handle = _stream_handle(stream, "range_start")
        if handle is None:
            return torch_npu._C._mstx._range_start_on_host(message, domain)
        if handle is False:
            return 0
        return torch_npu._C._mstx._range_start(message, handle, domain)

    @staticmethod
    @_no_exception()
    def range_end(range_id: int, domain: str = "default"):
        if not isinstance(range_id, int):
            warnings.warn("Invalid message for mstx.range_end func. Please input return value from mstx.range_start.")
            return
        if not _valid_text(domain, "domain", "range_end"):
            return
        torch_npu._C._mstx._range_end(range_id, domain)

    @staticmethod
    def range_push(message: str, stream=None, domain: str = "default") -> int:
        """Open a nested range on this thread; returns the nesting depth (0-based)."""
        stack = getattr(_stacks, "ranges", None)
        if stack is None:
            stack = _stacks.ranges = []
        stack.append(mstx.range_start(message, stream, domain))
        return len(stack) - 1

    @staticmethod
    def range_pop(domain: str = "default") -> int:
        """Close this thread's innermost range; returns the depth it had, -1 if none was open."""
        stack = getattr(_stacks, "ranges", None)
        if not stack:
            return -1
        mstx.range_end(stack.pop(), domain)
        return len(stack)

    @staticmethod
    @contextmanager
    def mstx_range(message: str, stream=None, domain: str = "default"):
        """A range around a block (``with``) or, as torch_npu's, around every call of a decorated function."""
        range_id = mstx.range_start(message, stream, domain)
        try:
            yield
        finally:
            mstx.range_end(range_id, domain)

    @staticmethod
    def annotate(message: str = "", stream=None, domain: str = "default"):
        """Decorator: run the function inside a range (named after the function by default)."""

        def decorate(fn):
            name = message or getattr(fn, "__qualname__", "annotated")

            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                with mstx.mstx_range(name, stream, domain):
                    return fn(*args, **kwargs)

            return wrapper

        return decorate

    @staticmethod
    def records():
        """Marks and finished ranges recorded so far (oldest first)."""
        with _lock:
            return list(_records)


mark = mstx.mark
range_start = mstx.range_start
range_end = mstx.range_end
range_push = mstx.range_push
range_pop = mstx.range_pop
mstx_range = mstx.mstx_range
annotate = mstx.annotate
