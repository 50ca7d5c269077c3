"""torch_npu.utils.profiler: a process-wide profiling switch for simple start/stop scripts.

``Profile(start_step, profile_type, ...)`` wraps torch_npu.profiler in one object that a training
loop calls once per step (``prof.start()`` / ``prof.end()``)."""

import os

__all__ = ["Profile", "Singleton"]


class Singleton:
    """Class decorator: the class has one instance per process."""

    def __init__(self, cls):
        self._cls = cls
        self._instance = None

    def __call__(self, *args, **kwargs):
        if self._instance is None:
            self._instance = self._cls(*args, **kwargs)
        return self._instance


@Singleton
class Profile:
    """Profile steps [start_step, start_step + steps): ``profile_type`` is "TORCH" (torch.profiler) or
    "NONE"; the trace lands in ``save_path`` (default ./npu_profiling)."""

    def __init__(
        self,
        start_step=int(os.getenv("PROFILE_START_STEP", "10")),  # noqa: B008 - torch_npu reads them at import
        profile_type=os.getenv("PROFILE_TYPE", "NONE"),  # noqa: B008
        save_path=os.getenv("PROFILE_SAVE_PATH", "./npu_profiling"),  # noqa: B008
        steps=1,
        **kwargs,
    ):
        if profile_type not in ("TORCH", "NONE", "CANN", "GE"):
            raise ValueError(f"profile_type must be TORCH, CANN, GE or NONE, but got {profile_type!r}")
        self.step_count = 0
        self.start_step = start_step
        self.steps = steps
        self.profile_type = profile_type
        self.save_path = save_path
        self._prof = None

    def start(self):
        self.step_count += 1
        if self.profile_type == "NONE" or self.step_count != self.start_step:
            return
        import torch

        os.makedirs(self.save_path, exist_ok=True)
        self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        self._prof.__enter__()

    def end(self):
        if self._prof is None or self.step_count < self.start_step + self.steps - 1:
            return
        self._prof.__exit__(None, None, None)
        self._prof.export_chrome_trace(os.path.join(self.save_path, f"trace_step{self.start_step}.json"))
        self._prof = None
