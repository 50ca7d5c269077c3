"""torch_npu.profiler.dynamic_profile: profile a running training job by editing a JSON file.

    from torch_npu.profiler import dynamic_profile as dp
    dp.init("./prof_cfg")          # writes ./prof_cfg/profiler_config.json (a template) if missing
    for batch in loader:
        train_one_step(batch)
        dp.step()                  # after each step: when the file changed, profile the next `active` steps

`set_state({"cur_step": N})` says a resumed job has already run N steps, so "start_step" counts from there (not
from the restart). `start(config_path)` profiles the next `active` steps right away from a given file. A session is
written by tensorboard_trace_handler into the file's "prof_dir" (parsed at once when "analyse" is true, else
later with torch_npu.profiler.analyse). Keys as torch_npu's profiler_config.json: activities, prof_dir,
analyse, record_shapes, profile_memory, with_stack, with_flops, with_modules, active, warmup, start_step,
is_rank, rank_list, experimental_config.
"""

import atexit
import enum
import json
import os
import warnings

__all__ = ["init", "step", "start", "set_state"]

CONFIG_NAME = "profiler_config.json"
TEMPLATE = {
    "activities": ["CPU", "NPU"],
    "prof_dir": "./",
    "analyse": False,
    "record_shapes": False,
    "profile_memory": False,
    "with_stack": False,
    "with_flops": False,
    "with_modules": False,
    "active": 1,
    "warmup": 0,
    "start_step": 0,
    "is_rank": False,
    "rank_list": [],
    "experimental_config": {
        "profiler_level": "Level0",
        "aic_metrics": "AiCoreNone",
        "l2_cache": False,
        "op_attr": False,
        "data_simplification": True,
        "record_op_args": False,
        "gc_detect_threshold": None,
        "export_type": ["text"],
        "msprof_tx": False,
        "mstx": False,
    },
}
_BOOLS = ("analyse", "record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules", "is_rank")
_EXPERIMENTAL_ENUMS = {"profiler_level": "ProfilerLevel", "aic_metrics": "AiCMetrics"}


def _read_config(path):
    """The validated configuration in `path`; ValueError naming the file and the key otherwise."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"dynamic_profile: cannot read {path}: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"dynamic_profile: {path} must hold a JSON object")
    config = dict(TEMPLATE, **data)
    for key in _BOOLS:
        if not isinstance(config[key], bool):
            raise ValueError(f"dynamic_profile: {path}: '{key}' must be true or false, got {config[key]!r}")
    for key in ("active", "warmup", "start_step"):
        if (
            not isinstance(config[key], int)
            or isinstance(config[key], bool)
            or config[key] < (1 if key == "active" else 0)
        ):
            raise ValueError(
                f"dynamic_profile: {path}: '{key}' must be an integer >= {1 if key == 'active' else 0}, "
                f"got {config[key]!r}"
            )
    if not set(config["activities"]) <= {"CPU", "NPU"} or not config["activities"]:
        raise ValueError(
            f"dynamic_profile: {path}: 'activities' must be a non-empty list of \"CPU\" and \"NPU\", got "
            f"{config['activities']!r}"
        )
    return config


def _experimental(values):
    from torch_npu import profiler

    kwargs = {}
    for key, value in (values or {}).items():
        if (
            key in _EXPERIMENTAL_ENUMS
            and isinstance(value, str)
            and hasattr(getattr(profiler, _EXPERIMENTAL_ENUMS[key]), value)
        ):
            value = getattr(getattr(profiler, _EXPERIMENTAL_ENUMS[key]), value)  # "Level1" / "AiCoreNone" names
        if key in (
            "profiler_level",
            "aic_metrics",
            "l2_cache",
            "op_attr",
            "data_simplification",
            "record_op_args",
            "gc_detect_threshold",
            "export_type",
            "msprof_tx",
            "mstx",
            "host_sys",
            "sys_io",
            "sys_interconnection",
            "mstx_domain_include",
            "mstx_domain_exclude",
        ):
            kwargs[key] = value
    return profiler._ExperimentalConfig(**kwargs)


class _DynamicProfile:
    def __init__(self):
        self.config_path = None
        self.mtime = None
        self.prof = None
        self.remaining = 0
        self.step_num = 0
        self.pending = None  # a configuration waiting for its start_step

    def init(self, path):
        if DynamicProfilerUtils.DYNAMIC_PROFILER_MODEL is DynamicProfilerUtils.DynamicProfilerConfigModel.DYNO_CONFIG:
            warnings.warn(
                "dynamic_profile: MSMONITOR_USE_DAEMON asks for msMonitor's daemon (dynolog), which sends the profiler "
                "configuration to the card's processes; vnpu has no daemon to receive it from, so dynamic profiling "
                "stays off. Set PROF_CONFIG_PATH to a directory to profile from its profiler_config.json instead."
            )
            return
        if self.config_path is not None:
            warnings.warn("dynamic_profile.init: already initialised; the second call is ignored")
            return
        os.makedirs(path, exist_ok=True)
        self.config_path = os.path.join(os.path.abspath(path), CONFIG_NAME)
        if not os.path.exists(self.config_path):
            with open(self.config_path, "w") as f:
                json.dump(TEMPLATE, f, indent=4)
        self.mtime = os.stat(self.config_path).st_mtime_ns
        atexit.register(self.finish)

    def _changed_config(self):
        try:
            mtime = os.stat(self.config_path).st_mtime_ns
        except OSError:
            return None
        if mtime == self.mtime:
            return None
        self.mtime = mtime
        try:
            return _read_config(self.config_path)
        except ValueError as e:
            warnings.warn(f"{e}; profiling not started")
            return None

    def step(self):
        self.step_num += 1
        if self.prof is not None:
            self.prof.step()
            self.remaining -= 1
            if self.remaining == 0:
                self.finish()
            return
        if self.config_path is not None:
            config = self._changed_config()
            if config is not None:
                self.pending = config
        if self.pending is not None and self.step_num >= self.pending["start_step"]:
            config, self.pending = self.pending, None
            self._enable(config)

    def set_state(self, state_step):
        cur_step = state_step.get("cur_step", 0) if isinstance(state_step, dict) else None
        if not isinstance(cur_step, int) or isinstance(cur_step, bool) or cur_step < 0:
            warnings.warn(
                f"dynamic_profile.set_state: expected a dict whose 'cur_step' is an integer >= 0, got {state_step!r}; "
                f"the step count stays {self.step_num}"
            )
            return
        self.step_num = cur_step

    def start(self, config_path=None):
        if self.prof is not None:
            warnings.warn("dynamic_profile.start: the profiler is already running; this call is ignored")
            return
        path = config_path or self.config_path
        if path is None:
            raise ValueError(
                "dynamic_profile.start: give a profiler_config.json path or call dynamic_profile.init first"
            )
        self._enable(_read_config(path))

    def _enable(self, config):
        from torch_npu import profiler

        if config["is_rank"] and int(os.environ.get("RANK", "0")) not in config["rank_list"]:
            return
        activities = [getattr(profiler.ProfilerActivity, a) for a in config["activities"]]
        warmup, active = config["warmup"], config["active"]
        self.prof = profiler.profile(
            activities=activities,
            schedule=profiler.schedule(wait=0, warmup=warmup, active=active, repeat=1),
            on_trace_ready=profiler.tensorboard_trace_handler(config["prof_dir"], analyse_flag=config["analyse"]),
            record_shapes=config["record_shapes"],
            profile_memory=config["profile_memory"],
            with_stack=config["with_stack"],
            with_flops=config["with_flops"],
            with_modules=config["with_modules"],
            experimental_config=_experimental(config.get("experimental_config")),
        )
        self.prof.add_metadata_json("dynamic_profile", json.dumps({"start_step": self.step_num, "config": config}))
        self.remaining = warmup + active
        self.prof.start()

    def finish(self):
        if self.prof is not None:
            prof, self.prof = self.prof, None
            prof.stop()


class DynamicProfilerUtils:
    """How dynamic profiling was enabled: a profiler_config.json directory (PROF_CONFIG_PATH, init(path)) or msMonitor's
    daemon (MSMONITOR_USE_DAEMON=1), which sends the configuration over IPC."""

    class DynamicProfilerConfigModel(enum.Enum):
        CFG_CONFIG = 0
        DYNO_CONFIG = 1

    DYNAMIC_PROFILER_MODEL = DynamicProfilerConfigModel.CFG_CONFIG


_state = _DynamicProfile()


def init(path: str):
    _state.init(path)


def step():
    _state.step()


def start(config_path: str = None):
    _state.start(config_path)


def set_state(state_step: dict):
    _state.set_state(state_step)
