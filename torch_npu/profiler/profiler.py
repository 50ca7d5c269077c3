"""torch_npu.profiler.profile: records npu operators as device activity (from the C++ core, no per-operator
Python) through torch_npu's schedule, and hands finished sessions to on_trace_ready, usually
tensorboard_trace_handler, which writes torch_npu's `..._ascend_pt` directory (ascend_output.py)."""
import enum
import os
import time
import warnings

import torch

from torch_npu import _C
from torch_npu.profiler import ascend_output
from torch_npu.profiler.experimental_config import _ExperimentalConfig
from torch_npu.profiler.scheduler import ProfilerAction, _default_schedule_fn

__all__ = ["profile", "ProfilerActivity", "supported_activities", "tensorboard_trace_handler"]

_RECORDING = (ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class ProfilerActivity(enum.Enum):
    CPU = 0
    NPU = 1


def supported_activities():
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}


def _default_dir():
    work = os.environ.get("ASCEND_WORK_PATH")
    return os.path.join(work, "profiling_data") if work else os.getcwd()


def tensorboard_trace_handler(dir_name=None, worker_name=None, analyse_flag=True, async_mode=False):
    """on_trace_ready handler: writes each finished session as `<dir>/<worker>_<timestamp>_ascend_pt/`
    (worker defaults to `<hostname>_<pid>`, dir to $ASCEND_WORK_PATH/profiling_data or the cwd)."""
    target = dir_name or _default_dir()

    def handler(prof):
        os.makedirs(target, exist_ok=True)
        prof._export(ascend_output.worker_dir(target, worker_name))

    return handler


class profile:
    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, custom_trace_id_callback=None, use_cuda=None):
        if use_cuda is not None:
            warnings.warn("This is npu environment, use_cuda is invalid")
        self.activities = set(activities) if activities else supported_activities()
        self.schedule = schedule or _default_schedule_fn
        self._has_schedule = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack, self.with_flops, self.with_modules = with_stack, with_flops, with_modules
        self.experimental_config = experimental_config or _ExperimentalConfig()
        self.custom_trace_id_callback = custom_trace_id_callback
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._recording = False
        self._steps = []
        self._step_start = 0
        self._metadata = {}
        self._last_session = []
        self._t0 = 0
        self._last_output = None

    # --- control
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop()

    def start(self):
        self._t0 = time.monotonic_ns()
        self._epoch_offset = time.time_ns() - self._t0
        self.current_action = self.schedule(self.step_num)
        self._step_start = self._t0
        self._enter(self.current_action)

    def stop(self):
        if self._recording:
            self._close_step()
            self._finish(save=self.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE))
        self.current_action = ProfilerAction.NONE

    def step(self):
        previous = self.current_action
        if self._recording:
            self._close_step()
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        if previous == ProfilerAction.RECORD_AND_SAVE or (
                previous in _RECORDING and self.current_action not in _RECORDING):
            self._finish(save=previous != ProfilerAction.WARMUP)
        elif previous == ProfilerAction.WARMUP and self.current_action != ProfilerAction.WARMUP:
            _C._activity_stop()  # warm-up activity is discarded
            self._recording = False
            self._steps = []
        self._step_start = time.monotonic_ns()
        self._enter(self.current_action)

    def _enter(self, action):
        if action in _RECORDING and not self._recording and ProfilerActivity.NPU in self.activities:
            _C._activity_start(self.record_shapes)
            self._recording = True

    def _close_step(self):
        if self.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._steps.append((self.step_num, self._step_start, time.monotonic_ns()))

    def _finish(self, save):
        activities = _C._activity_stop()
        self._recording = False
        steps, self._steps = self._steps, []
        if save:
            self._last_session = activities
            self._last_steps = steps
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)

    # --- results
    def add_metadata(self, key, value):
        self._metadata[str(key)] = str(value)

    def add_metadata_json(self, key, value):
        self._metadata[str(key)] = value

    def _config(self):
        import torch_npu

        return {"config": {"common_config": {"activities": sorted(a.name for a in self.activities),
                                             "record_shapes": self.record_shapes,
                                             "profile_memory": self.profile_memory, "with_stack": self.with_stack,
                                             "with_flops": self.with_flops, "with_modules": self.with_modules},
                           "experimental_config": self.experimental_config.to_dict()},
                "start_info": {"syscnt_enable": False, "freq": 1000000000, "start_cnt": self._t0,
                               "start_monotonic": self._t0},
                "end_info": {"collectionTimeEnd": time.time_ns(), "MonotonicTimeEnd": time.monotonic_ns()},
                "torch_npu_version": torch_npu.__version__, "cann_version": torch_npu.utils.get_cann_version(),
                "rank_id": int(os.environ.get("RANK", "-1"))}

    def _export(self, path):
        metadata = dict(self._metadata)
        metadata["ENV_VARIABLES"] = {k: v for k, v in os.environ.items() if k.startswith(("ASCEND_", "HCCL_"))}
        if self.custom_trace_id_callback is not None:
            metadata["trace_id"] = self.custom_trace_id_callback()
        self._last_output = ascend_output.write_session(
            path, self._last_session, t0_ns=self._t0, epoch_offset_ns=self._epoch_offset,
            steps=self._last_steps if self._has_schedule else [], record_shapes=self.record_shapes,
            config=self._config(), metadata=metadata)
        return self._last_output

    def export_chrome_trace(self, path):
        """The session's trace_view.json content, written to `path`."""
        import json

        with open(path, "w") as f:
            json.dump(ascend_output._trace_events(self._last_session, self._t0, os.getpid()), f)
        return path

    @property
    def activities_recorded(self):
        """The last saved session's npu operators (name, times, device, stream, shapes)."""
        return list(self._last_session)

