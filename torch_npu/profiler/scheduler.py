"""torch_npu.profiler.schedule and ProfilerAction: PyTorch's step-cycle algorithm (wait, warmup, active,
repeat, skip_first, skip_first_wait), returning torch_npu's ProfilerAction."""

import enum
from collections.abc import Callable

import torch.profiler

__all__ = ["ProfilerAction", "Schedule", "schedule"]


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(
    wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0, skip_first_wait: int = 0
) -> Callable:
    torch_schedule = torch.profiler.schedule(
        wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first, skip_first_wait=skip_first_wait
    )

    def schedule_fn(step: int) -> ProfilerAction:
        return ProfilerAction[torch_schedule(step).name]

    return schedule_fn


def _default_schedule_fn(_: int) -> ProfilerAction:
    """Without a schedule every step records (no step markers), as torch_npu."""
    return ProfilerAction.RECORD


class Schedule:
    """torch_npu's schedule class: callable with a step number, returning the ProfilerAction."""

    def __init__(
        self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0, skip_first_wait: int = 0
    ) -> None:
        self._fn = schedule(wait, active, warmup, repeat, skip_first, skip_first_wait)

    def __call__(self, step: int) -> ProfilerAction:
        return self._fn(step)
