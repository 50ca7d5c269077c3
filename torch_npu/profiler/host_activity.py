"""Host activity for torch_npu.profiler (ProfilerActivity.CPU): PyTorch's own kineto CPU profiler records
the operators as the host issues them, record_function and mstx ranges, Python frames (with_stack /
with_modules) and FLOPs; its events are read once when recording stops.

Times are converted to the steady clock the C++ core stamps device activity with, so host operators and
npu "kernels" share one timeline. Thread ids are RecordFunction's, the same the core records.
"""

import time
import warnings

import torch
from torch._C._profiler import _ExperimentalConfig
from torch.autograd import (
    ProfilerActivity,
    ProfilerConfig,
    ProfilerState,
    _disable_profiler,
    _enable_profiler,
    _prepare_profiler,
)

from torch_npu import _C
from torch_npu.profiler.timeline import innermost_enclosing, nesting_parents

__all__ = ["HostRecorder"]

_CATEGORIES = {"cpu_op", "user_annotation", "python_function"}


class HostRecorder:
    def __init__(
        self, record_shapes=False, with_stack=False, with_flops=False, with_modules=False, profile_memory=False
    ):
        # profile_memory: kineto also records the allocations, which PyTorch's memory profiler needs
        self._config = ProfilerConfig(
            ProfilerState.KINETO,
            record_shapes,
            profile_memory,
            with_stack,
            with_flops,
            with_modules,
            _ExperimentalConfig(),
        )
        self.result = None  # PyTorch's profiler result of the last recording (its memory profile reads it)
        self._on = False
        self._offset_ns = 0
        self._kernels_before = True

    def start(self):
        """False (with a warning) when another PyTorch profiler already records this thread."""
        if torch.autograd.profiler._is_profiler_enabled:
            warnings.warn(
                "torch_npu.profiler: another PyTorch profiler is already recording; host (CPU) activity is "
                "left to it and only npu activity is recorded"
            )
            return False
        # PrivateUse1 makes kineto run vnpu's plugin session, which hands PyTorch's correlation ids to the
        # core (device activity and memory events then name their host operator exactly); its own kernels
        # are switched off, torch_npu.profiler's recorder has them.
        activities = {ProfilerActivity.CPU, ProfilerActivity.PrivateUse1}
        self._kernels_before = _C._kineto_npu_kernels(False)
        try:
            _prepare_profiler(self._config, activities)
            _enable_profiler(self._config, activities)
        except BaseException:
            _C._kineto_npu_kernels(self._kernels_before)
            raise
        self._offset_ns = time.time_ns() - time.monotonic_ns()
        self._on = True
        return True

    def stop(self):
        """The recorded host events as dicts: name, cat, start_ns/end_ns (steady clock), thread, shapes,
        dtypes, stack, flops, sequence / fwd_thread (autograd's sequence number; a backward op's forward thread)."""
        if not self._on:
            return []
        self._on = False
        try:
            result = self.result = _disable_profiler()
        finally:
            _C._kineto_npu_kernels(self._kernels_before)
        offset = self._offset_ns
        events = []
        for e in result.events():
            cat = e.activity_type()
            if cat not in _CATEGORIES or e.device_type() != torch.autograd.DeviceType.CPU:
                continue
            try:
                name = e.name()
            except UnicodeDecodeError:  # PyTorch's Python tracer now and then keeps a frame name it cannot decode
                continue
            start = e.start_ns() - offset
            event = {
                "name": name,
                "cat": cat,
                "start_ns": start,
                "end_ns": start + e.duration_ns(),
                "thread": e.start_thread_id(),
                "correlation": e.correlation_id(),
            }
            if cat == "cpu_op":
                if e.shapes():
                    event["shapes"] = [list(s) for s in e.shapes()]
                    event["dtypes"] = list(e.dtypes())
                if e.flops():
                    event["flops"] = e.flops()
                if e.sequence_nr() >= 0:  # autograd's link: a backward op names its forward op's thread and number
                    event["sequence"] = e.sequence_nr()
                    if e.fwd_thread_id():
                        event["fwd_thread"] = e.fwd_thread_id()
            events.append(event)
        events.sort(key=lambda ev: (ev["start_ns"], -ev["end_ns"]))
        _attach_stacks(events)
        return events


def _attach_stacks(events):
    """with_stack: each host operator gets the Python frames it was called from (innermost first), from the
    python_function events of its thread."""
    frames = [e for e in events if e["cat"] == "python_function"]
    if not frames:
        return
    frame_parent = nesting_parents(frames)
    ops = [e for e in events if e["cat"] == "cpu_op"]
    for op, k in zip(ops, innermost_enclosing(frames, [(op["thread"], op["start_ns"]) for op in ops])):
        stack = []
        while k is not None:
            stack.append(frames[k]["name"])
            k = frame_parent[k]
        if stack:
            op["stack"] = stack
