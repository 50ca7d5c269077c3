"""torch_npu.profiler.schedule (the Schedule class) and ProfilerAction: PyTorch's step cycle (skip_first,
then wait, warmup and active steps, repeated `repeat` times or forever; skip_first_wait drops the first wait).
As torch_npu, invalid arguments print a profiler warning and are reset (wait, warmup, repeat, skip_first to 0,
active to 1) instead of raising; the arguments stay readable as attributes."""

import enum

from torch_npu.profiler.analysis.prof_common_func._constant import print_warn_msg
from torch_npu.utils._error_code import ErrCode, prof_error

__all__ = ["ProfilerAction", "Schedule", "schedule"]


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def _count(value, name, minimum, default):
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return value
    print_warn_msg(f"Invalid parameter {name}, reset it to {default}.")
    return default


class Schedule:
    """Callable with a step number (>= 0), returning the ProfilerAction of that step."""

    def __init__(
        self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0, skip_first_wait: int = 0
    ) -> None:
        self.wait = _count(wait, "wait", 0, 0)
        self.active = _count(active, "active", 1, 1)
        self.warmup = _count(warmup, "warmup", 0, 0)
        self.repeat = _count(repeat, "repeat", 0, 0)
        self.skip_first = _count(skip_first, "skip_first", 0, 0)
        self.skip_first_wait = (
            skip_first_wait if isinstance(skip_first_wait, int) else _count(None, "skip_first_wait", 0, 0)
        )
        if self.warmup == 0:
            print_warn_msg("Profiler won't be using warmup, this can skew profiler results")

    def __call__(self, step: int) -> ProfilerAction:
        if step < 0:
            raise ValueError("Invalid parameter step, which must be not less than 0." + prof_error(ErrCode.VALUE))
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        if self.skip_first_wait:
            step += self.wait
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and step // cycle >= self.repeat:
            return ProfilerAction.NONE
        position = step % cycle
        if position < self.wait:
            return ProfilerAction.NONE
        if position < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if position < cycle - 1 else ProfilerAction.RECORD_AND_SAVE


schedule = Schedule


def _default_schedule_fn(_: int) -> ProfilerAction:
    """Without a schedule every step records (no step markers), as torch_npu."""
    return ProfilerAction.RECORD
