"""Dynamic profiling without code changes: with PROF_CONFIG_PATH (or msMonitor's MSMONITOR_USE_DAEMON=1) set,
`import torch_npu` initialises dynamic_profile and every optimizer step advances it, as torch_npu does.

The steps are counted with PyTorch's global optimizer step hook: each optimizer counts its own steps and the
profiler takes a step whenever the largest count grows, so several optimizers stepping once per iteration make
one profiler step, and gradient accumulation makes none until the optimizer steps.
"""

import os
from weakref import WeakKeyDictionary

from torch.optim.optimizer import register_optimizer_step_post_hook

from torch_npu.profiler.analysis.prof_common_func._constant import print_error_msg, print_warn_msg
from torch_npu.profiler.dynamic_profile import DynamicProfilerUtils
from torch_npu.profiler.dynamic_profile import init as dp_init
from torch_npu.profiler.dynamic_profile import step as dp_step
from torch_npu.utils._path_manager import PathManager

__all__ = []


class _NonIntrusiveProfile:
    _optimizer_step_hook_handle = None
    _optimizer_steps = WeakKeyDictionary()  # optimizer -> the steps it has taken
    _profiler_step = 0

    @classmethod
    def _optimizer_step_post_hook(cls, optimizer, _args, _kwargs):
        steps = cls._optimizer_steps.get(optimizer, 0) + 1
        cls._optimizer_steps[optimizer] = steps
        if steps > cls._profiler_step:
            dp_step()
            cls._profiler_step = steps

    @classmethod
    def _register_optimizer_step_hook(cls):
        if cls._optimizer_step_hook_handle is not None:
            return
        cls._optimizer_steps.clear()
        cls._profiler_step = 0
        cls._optimizer_step_hook_handle = register_optimizer_step_post_hook(cls._optimizer_step_post_hook)

    @staticmethod
    def init():
        config_path = os.getenv("PROF_CONFIG_PATH", "")
        kineto = os.getenv("KINETO_USE_DAEMON")
        if kineto is not None:
            print_warn_msg(
                "Environment variable 'KINETO_USE_DAEMON' will be deprecated. Please use 'MSMONITOR_USE_DAEMON' instead."
            )
        daemon = os.getenv("MSMONITOR_USE_DAEMON") or kineto or 0
        try:
            daemon = int(daemon)
        except ValueError:
            print_error_msg("Environment variable 'MSMONITOR_USE_DAEMON' value not valid, will be set to 0 !")
            daemon = 0
        if not config_path and daemon != 1:
            return
        if config_path:
            try:
                PathManager.check_input_directory_path(config_path)
            except RuntimeError:
                print_error_msg(f"The path '{config_path}' is invalid, and profiler will not be enabled.")
                return
        else:
            DynamicProfilerUtils.DYNAMIC_PROFILER_MODEL = DynamicProfilerUtils.DynamicProfilerConfigModel.DYNO_CONFIG
        dp_init(config_path)
        _NonIntrusiveProfile._register_optimizer_step_hook()
