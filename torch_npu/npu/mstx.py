"""mstx: lightweight marks and ranges in npu timelines (torch_npu.npu.mstx).

Marks and ranges are kept in this process (``mstx.records()``) for torch_npu.profiler, and appear in
torch.profiler traces as record_function events while a profiler runs.
"""

import itertools
import threading
import time
from contextlib import contextmanager

import torch

__all__ = ["mstx", "mark", "range_start", "range_end", "range_push", "range_pop", "mstx_range", "annotate"]

_lock = threading.Lock()
_records = []
_ids = itertools.count(1)
_open = {}  # range id -> (message, domain, start_ns, profiler handle)
_stacks = threading.local()
_MAX_RECORDS = 100000


def _check_message(message):
    if not isinstance(message, str):
        raise TypeError(f"mstx message must be a str, but got {type(message).__name__}")


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


class mstx:
    @staticmethod
    def mark(message: str, stream=None, domain: str = "default"):
        """An instantaneous mark."""
        _check_message(message)
        _append(
            {
                "kind": "mark",
                "message": message,
                "domain": domain,
                "ns": time.monotonic_ns(),
                "stream": getattr(stream, "stream_id", None),
            }
        )
        _profiler_exit(_profiler_enter(message))

    @staticmethod
    def range_start(message: str, stream=None, domain: str = "default") -> int:
        """Open a range; returns its id for range_end (ranges may overlap and cross threads)."""
        _check_message(message)
        range_id = next(_ids)
        with _lock:
            _open[range_id] = (message, domain, time.monotonic_ns(), _profiler_enter(message))
        return range_id

    @staticmethod
    def range_end(range_id: int, domain: str = "default"):
        with _lock:
            if range_id not in _open:
                raise ValueError(f"mstx.range_end: no open range with id {range_id}")
            message, opened_domain, start, handle = _open.pop(range_id)
        _profiler_exit(handle)
        _append(
            {
                "kind": "range",
                "message": message,
                "domain": opened_domain,
                "start_ns": start,
                "end_ns": time.monotonic_ns(),
                "id": range_id,
            }
        )

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

            def wrapper(*args, **kwargs):
                with mstx.mstx_range(name, stream, domain):
                    return fn(*args, **kwargs)

            wrapper.__wrapped__ = fn
            wrapper.__name__ = getattr(fn, "__name__", "wrapper")
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
