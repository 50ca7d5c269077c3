"""torch_npu.profiler.profile: records npu operators as device activity (from the C++ core, no per-operator
Python) through torch_npu's schedule, and hands finished sessions to on_trace_ready, usually
tensorboard_trace_handler, which writes torch_npu's `..._ascend_pt` directory (ascend_output.py)."""

import collections
import enum
import json
import os
import time
import uuid
import warnings
from collections.abc import Callable

import torch

from torch_npu import _C
from torch_npu._patches import FLOPS_COUNTING, set_runtime_patch
from torch_npu.npu import mstx
from torch_npu.npu.npu_config import is_jit_compile_false
from torch_npu.profiler import ascend_output, communication, memory_timeline, trace_view
from torch_npu.profiler import session as session_record
from torch_npu.profiler._profiler_path_creator import ProfPathCreator
from torch_npu.profiler.analysis import analyse
from torch_npu.profiler.analysis.prof_common_func._constant import print_warn_msg
from torch_npu.profiler.analysis.prof_common_func._utils import check_msprof_env
from torch_npu.profiler.event_record import _disable_event_record, _enable_event_record
from torch_npu.profiler.experimental_config import _ExperimentalConfig
from torch_npu.profiler.host_activity import HostRecorder
from torch_npu.profiler.scheduler import ProfilerAction, _default_schedule_fn

__all__ = ["profile", "ProfilerActivity", "supported_activities", "tensorboard_trace_handler", "analyse"]

_RECORDING = (ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def _rank_id():
    """The global rank (torch_npu names profiler_info_<rank>.json after it), -1 outside distributed jobs."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", "-1"))


class ProfilerActivity(enum.Enum):
    CPU = 0
    NPU = 1


def _activity(value):
    """torch_npu's ProfilerActivity from ours or torch.profiler's (CPU; NPU / PrivateUse1 as NPU)."""
    if isinstance(value, ProfilerActivity):
        return value
    name = getattr(value, "name", None)
    if name == "CPU":
        return ProfilerActivity.CPU
    if name in ("NPU", "PrivateUse1"):
        return ProfilerActivity.NPU
    raise TypeError(f"activities must be torch_npu.profiler.ProfilerActivity values (CPU, NPU), got {value!r}")


def supported_activities() -> set:
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}


def tensorboard_trace_handler(
    dir_name: str | None = None, worker_name: str | None = None, analyse_flag: bool = True, async_mode: bool = False
) -> Callable:
    """on_trace_ready handler: each finished session is written as `<dir>/<worker>_<timestamp>_ascend_pt/`
    (worker defaults to `<hostname>_<pid>`, dir to $ASCEND_WORK_PATH/profiling_data or the cwd) and analysed
    there. With analyse_flag=False only the raw data is written; `torch_npu.profiler.analyse(dir)` parses it
    later. As torch_npu's, making the handler sets ProfPathCreator's directory and worker name."""
    if not isinstance(analyse_flag, bool):
        raise TypeError(f"analyse_flag must be a bool, but got {type(analyse_flag).__name__}")
    ProfPathCreator().init(worker_name=worker_name, dir_name=dir_name)

    def handler(prof):
        if analyse_flag:
            prof.prof_if.analyse(async_mode=async_mode)

    # the session's directory follows this handler's arguments even if another handler was made since
    handler.output_target = (dir_name, worker_name)
    return handler


class _SessionDirectory:
    """`prof.prof_if` of a profile: the last saved session's `..._ascend_pt` directory (`prof_path`, where its
    raw data was written before on_trace_ready ran) and `analyse()`, which writes its ASCEND_PROFILER_OUTPUT —
    what torch_npu's profiler interface gives the on_trace_ready handlers its documentation shows."""

    def __init__(self, profiler):
        self._profiler = profiler

    @property
    def prof_path(self):
        return self._profiler._session_dir

    def analyse(self, async_mode: bool = False):
        """Analysed synchronously on vnpu (async_mode is accepted: the result is the same, only sooner)."""
        if self.prof_path is None or self._profiler._session is None:
            raise RuntimeError("the profiler has saved no session yet: prof_if.analyse() is for on_trace_ready")
        self._profiler._last_output = ascend_output.write_session(self.prof_path, self._profiler._session)
        return self._profiler._last_output


class _KinetoProfile:
    """The profiler's core, as torch_npu names it: start()/stop() record, export_* write what was recorded.
    profile adds nothing of its own here: schedule and on_trace_ready are accepted by both."""

    def __init__(
        self,
        *,
        activities=None,
        schedule=None,
        on_trace_ready=None,
        record_shapes=False,
        profile_memory=False,
        with_stack=False,
        with_flops=False,
        with_modules=False,
        experimental_config=None,
        custom_trace_id_callback=None,
        use_cuda=None,
        execution_trace_observer=None,
    ):
        if use_cuda is not None:
            warnings.warn("This is npu environment, use_cuda is invalid")
        self.activities = {_activity(a) for a in activities} if activities else supported_activities()
        self.schedule = schedule or _default_schedule_fn
        self._has_schedule = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack, self.with_flops, self.with_modules = with_stack, with_flops, with_modules
        self.experimental_config = experimental_config or _ExperimentalConfig()
        self.custom_trace_id_callback = custom_trace_id_callback
        # PyTorch's execution trace observer: started and stopped with each recording window, cleaned up on exit
        self.execution_trace_observer = execution_trace_observer
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._recording = False
        self._steps = []
        self._collectives = []
        self._runtime_api = []
        self._mstx = []  # the marks and ranges of torch_npu.npu.mstx in the recording window
        self._window_start = 0
        self._records_under_msprof = False  # the msprof command line's own whole-program profile
        self._step_start = 0
        self._metadata = {}
        self._session = None
        self._host = None
        self._t0 = 0
        self._epoch_offset = 0
        self._trace_id = ""
        self._last_output = None
        self._session_dir = None
        self._host_result = None  # PyTorch's profiler result of the last recording window
        self.prof_if = _SessionDirectory(self)

    # --- control
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop()
        if self.execution_trace_observer:
            self.execution_trace_observer.cleanup()

    def start(self):
        self._trace_id = self.custom_trace_id_callback() if self.custom_trace_id_callback else uuid.uuid4().hex
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
            previous in _RECORDING and self.current_action not in _RECORDING
        ):
            self._finish(save=previous != ProfilerAction.WARMUP)
        elif previous == ProfilerAction.WARMUP and self.current_action != ProfilerAction.WARMUP:
            self._collect()  # warm-up activity is discarded
            self._steps = []
        self._step_start = time.monotonic_ns()
        self._enter(self.current_action)

    def _enter(self, action):
        if action not in _RECORDING or self._recording:
            return
        if not (self._records_under_msprof or check_msprof_env()):  # msprof profiles this process: it records
            return
        if self.execution_trace_observer:
            self.execution_trace_observer.start()
        if ProfilerActivity.NPU in self.activities:
            _C._activity_start(self.record_shapes)
            _C._collective_start()
            _C._runtime_api_start()
        if ProfilerActivity.CPU in self.activities:
            self._host = HostRecorder(
                self.record_shapes, self.with_stack, self.with_flops, self.with_modules, self.profile_memory
            )
            if not self._host.start():
                self._host = None
        if self.profile_memory:
            _C._profiler_memory_start()
        if self.experimental_config.record_flops:
            set_runtime_patch(FLOPS_COUNTING, True)
        _enable_event_record()
        self._window_start = time.monotonic_ns()
        self._recording = True

    def _collect(self):
        _disable_event_record()
        if self.execution_trace_observer:
            self.execution_trace_observer.stop()
        activities = _C._activity_stop() if ProfilerActivity.NPU in self.activities else []
        self._collectives = _C._collective_stop() if ProfilerActivity.NPU in self.activities else []
        self._runtime_api = _C._runtime_api_stop() if ProfilerActivity.NPU in self.activities else []
        host = self._host.stop() if self._host is not None else []
        if self._host is not None:
            self._host_result = self._host.result
        self._host = None
        memory = _C._profiler_memory_stop() if self.profile_memory else []
        if self.experimental_config.record_flops:
            set_runtime_patch(FLOPS_COUNTING, False)
        self._mstx = [
            dict(r)
            for r in mstx.records()
            if r.get("ns", r.get("start_ns", 0)) >= self._window_start
            and self.experimental_config.collects_mstx_domain(r["domain"])
        ]
        self._recording = False
        return activities, host, memory

    def _close_step(self):
        if self.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._steps.append((self.step_num, self._step_start, time.monotonic_ns()))

    def _finish(self, save):
        activities, host, memory = self._collect()
        steps, self._steps = self._steps, []
        if save:
            threads = collections.Counter(a["thread"] for a in activities)
            record = {
                "pid": os.getpid(),
                "main_thread": threads.most_common(1)[0][0] if threads else 0,
                "t0_ns": self._t0,
                "epoch_offset_ns": self._epoch_offset,
                "record_shapes": self.record_shapes,
                "profile_memory": self.profile_memory,
                "has_steps": self._has_schedule,
                "steps": steps,
                "activities": activities,
                "host_events": host,
                "memory": [tuple(m) for m in memory],
                "devices": _device_facts(activities, memory),
                "npu_activity": ProfilerActivity.NPU in self.activities,
                "profiler_level": self.experimental_config.profiler_level,
                "aic_metrics": self.experimental_config.aic_metrics,
                "jit_compile": not is_jit_compile_false(),
                "collectives": self._collectives,
                "runtime_api": self._runtime_api,
                "mstx": self._mstx,
                "export_type": list(self.experimental_config.export_type),
                "rank_id": _rank_id(),
                "parallel_group_info": communication.parallel_group_info(),
            }
            self._session = session_record.prepare(record, align_clocks=True)
            if self.on_trace_ready is not None:
                self._save_raw(getattr(self.on_trace_ready, "output_target", None))
                self.on_trace_ready(self)
            elif os.environ.get("ASCEND_WORK_PATH"):
                # torch_npu: without a handler the session goes to $ASCEND_WORK_PATH/profiling_data
                self._save_raw((None, None))
                self.prof_if.analyse()

    def _save_raw(self, target):
        """The session's raw data in a new directory of ProfPathCreator's (a tensorboard handler's own
        directory and worker name first), before on_trace_ready runs, as torch_npu writes it."""
        creator = ProfPathCreator()
        if target is not None:
            creator.init(worker_name=target[1], dir_name=target[0])
        self._session_dir = self._export(creator.create_prof_dir(), analyse=False)

    def get_trace_id(self):
        """The trace id of the session (custom_trace_id_callback's, or one made at start)."""
        return self._trace_id

    def set_custom_trace_id_callback(self, callback):
        if not callable(callback):
            raise TypeError(f"callback must be callable, but got {type(callback).__name__}")
        self.custom_trace_id_callback = callback

    @classmethod
    def enable_profiler_in_child_thread(
        cls,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
    ):
        """Child threads' npu operators and allocations are always recorded on vnpu (the core records every
        thread); their host operator lanes are not (PyTorch's CPU profiler follows the starting thread and
        autograd's threads only). Kept for API compatibility; returns whether a session is recording."""
        return bool(_C._activity_recording())

    @classmethod
    def disable_profiler_in_child_thread(cls):
        return None

    # --- results
    def add_metadata(self, key, value):
        self._metadata[str(key)] = str(value)

    def add_metadata_json(self, key, value):
        """Store `value`, a JSON string, as the parsed JSON under `key` in profiler_metadata.json."""
        if not isinstance(value, str):
            warnings.warn(f"add_metadata_json: value of {key!r} must be a JSON string, got {type(value).__name__}")
            return
        try:
            self._metadata[str(key)] = json.loads(value)
        except ValueError:
            warnings.warn(f"add_metadata_json: value of {key!r} is not valid JSON: {value!r}")

    def _config(self):
        import torch_npu

        return {
            "config": {
                "common_config": {
                    "activities": sorted(a.name for a in self.activities),
                    "record_shapes": self.record_shapes,
                    "profile_memory": self.profile_memory,
                    "with_stack": self.with_stack,
                    "with_flops": self.with_flops,
                    "with_modules": self.with_modules,
                },
                "experimental_config": self.experimental_config.to_dict(),
            },
            "start_info": {
                "syscnt_enable": False,
                "freq": 1000000000,
                "start_cnt": self._t0,
                "start_monotonic": self._t0,
            },
            "end_info": {"collectionTimeEnd": time.time_ns(), "MonotonicTimeEnd": time.monotonic_ns()},
            "torch_npu_version": torch_npu.__version__,
            "cann_version": torch_npu.utils.get_cann_version(),
            "rank_id": _rank_id(),
        }

    def _export(self, path, analyse=True):
        metadata = dict(self._metadata)
        metadata["ENV_VARIABLES"] = {k: v for k, v in os.environ.items() if k.startswith(("ASCEND_", "HCCL_", "VNPU_"))}
        metadata["trace_id"] = self._trace_id
        if self._session.get("parallel_group_info"):
            metadata["parallel_group_info"] = self._session["parallel_group_info"]
        ascend_output.write_metadata(path, self._config(), metadata)
        session_record.save(path, self._session)
        self._last_output = ascend_output.write_session(path, self._session) if analyse else path
        return self._last_output

    def export_chrome_trace(self, path):
        """The session's trace_view.json content, written to `path`."""
        events = trace_view.trace_events(self._saved())
        with open(path, "w") as f:
            json.dump(events, f)
        return path

    def export_memory_timeline(self, output_path: str, device: str | None = None) -> None:
        """PyTorch's memory timeline (memory_timeline.py) of the last recorded session on `device` (npu:0 by
        default); as torch_npu's, it warns and writes nothing unless the session recorded shapes, memory and
        stacks or modules."""
        missing = []
        if not self.record_shapes:
            missing.append("record_shapes=True")
        if not self.profile_memory:
            missing.append("profile_memory=True")
        if not (self.with_stack or self.with_modules):
            missing.append("with_stack=True or with_modules=True")
        if missing:
            print_warn_msg(f"{', '.join(missing)} required for memory profiling.")
            return
        if self._host_result is None:
            print_warn_msg("Invalid profiling path.")
            return
        memory_timeline.export_memory_timeline(self._host_result, output_path, device or "npu:0")

    def export_stacks(self, path, metric="self_npu_time_total"):
        """Folded stacks (flamegraph.pl / speedscope input) of the host operators recorded with with_stack,
        weighted by the device time they issued (self_npu_time_total) or their host time (self_cpu_time_total)."""
        if metric not in ("self_npu_time_total", "self_cpu_time_total"):
            raise ValueError(f"metric must be self_npu_time_total or self_cpu_time_total, got {metric!r}")
        session = self._saved()
        weights = collections.Counter()
        host = session["host_events"]
        if metric == "self_npu_time_total":
            for a, p in zip(session["activities"], session["kernel_parents"]):
                if p is not None and host[p].get("stack"):
                    weights[";".join(reversed(host[p]["stack"])) + ";" + host[p]["name"]] += a["end_ns"] - a["start_ns"]
        else:
            for e in host:
                if e["cat"] == "cpu_op" and e.get("stack"):
                    weights[";".join(reversed(e["stack"])) + ";" + e["name"]] += e["end_ns"] - e["start_ns"]
        with open(path, "w") as f:
            for stack, ns in weights.most_common():
                f.write(f"{stack} {ns // 1000}\n")
        return path

    def _saved(self):
        if self._session is None:
            raise RuntimeError(
                "torch_npu.profiler: no profiling data has been saved yet; run the profile (and its "
                "schedule) through a RECORD_AND_SAVE step or to stop() first"
            )
        return self._session

    @property
    def activities_recorded(self):
        """The last saved session's npu operators (name, times, device, stream, shapes)."""
        return list(self._session["activities"]) if self._session else []

    @property
    def host_events_recorded(self):
        """The last saved session's host events (operators, record_function / mstx ranges, Python frames)."""
        return list(self._session["host_events"]) if self._session else []

    @property
    def memory_events_recorded(self):
        """The last saved session's allocator events: (ptr, bytes, allocated, reserved, active, device, stream,
        time_ns, thread)."""
        return list(self._session["memory"]) if self._session else []


class profile(_KinetoProfile):
    """torch_npu.profiler.profile: the profiler, driven by a schedule and handing finished sessions to
    on_trace_ready."""


def _device_facts(activities, memory):
    facts = {}
    for d in sorted({a["device"] for a in activities} | {m[5] for m in memory}):
        if d >= 0:
            props = torch.npu.get_device_properties(d)
            facts[str(d)] = {"name": props.name, "total_memory": props.total_memory}
    return facts
