"""Binding the calling thread to CPU cores (torch_npu.utils.set_thread_affinity).

As in torch_npu this acts when CPU_AFFINITY_CONF selects mode 1 or 2; otherwise it notes once that
core binding is off. Cores are bound with sched_setaffinity on the calling thread (Linux)."""

import os

from torch_npu.utils._error_code import ErrCode, pta_error
from torch_npu.utils._warnings import npu_warn_once

__all__ = ["set_thread_affinity", "reset_thread_affinity"]

_initial = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None


def _affinity_mode():
    conf = os.environ.get("CPU_AFFINITY_CONF", "")
    mode = conf.split(",")[0].strip() if conf else "0"
    if mode not in ("0", "1", "2"):
        raise ValueError(f"CPU_AFFINITY_CONF mode must be 0, 1 or 2, but got {mode!r}" + pta_error(ErrCode.VALUE))
    return int(mode)


def _cores(core_range):
    if isinstance(core_range, list) and len(core_range) == 2 and all(isinstance(x, int) for x in core_range):
        ranges = [core_range]
    elif isinstance(core_range, list) and core_range and all(isinstance(x, list) and len(x) == 2 for x in core_range):
        ranges = core_range
    else:
        raise ValueError(f"Invalid core range: {core_range}" + pta_error(ErrCode.PARAM))
    cores = set()
    for start, end in ranges:
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
            raise ValueError(f"Invalid core range: {core_range}" + pta_error(ErrCode.PARAM))
        cores.update(range(start, end + 1))
    return cores


def set_thread_affinity(core_range=None):
    """Bind this thread to cores [start, end] (or several such ranges); None restores the default."""
    cores = None if core_range is None else _cores(core_range)
    if _affinity_mode() == 0:
        npu_warn_once(
            "affinity-off",
            "set_thread_affinity has no effect: CPU_AFFINITY_CONF does not enable core " "binding (set it to 1 or 2).",
        )
        return
    if _initial is None:
        return
    target = set(_initial) if cores is None else cores & set(_initial)
    if not target:
        raise ValueError(
            f"None of the cores {sorted(cores)} is available to this process "
            f"(allowed: {sorted(_initial)})" + pta_error(ErrCode.VALUE)
        )
    os.sched_setaffinity(0, target)


def reset_thread_affinity():
    """Give this thread back the cores the process started with."""
    if _initial is not None and _affinity_mode() != 0:
        os.sched_setaffinity(0, _initial)


def _bind_core_range(core_start, core_end):
    """torch_npu._C._npu_set_thread_affinity(core_start, core_end): cores [core_start, core_end], or with
    core_start -1 the binding of the process's other threads (the cores it started with)."""
    set_thread_affinity(None if core_start == -1 else [core_start, core_end])
