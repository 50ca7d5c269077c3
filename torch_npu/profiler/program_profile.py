"""Profiling a whole program without code changes (`msprof --application=...`, `vnpu profile -- ...`).

The command line starts the program with VNPU_PROFILE_OUTPUT=<dir> (and VNPU_PROFILE_OPTIONS, a comma
list of record_shapes, profile_memory, with_stack, with_modules, with_flops), and PROFILER_SAMPLECONFIG as the
msprof command line sets it: the program's own torch_npu.profiler calls then record nothing, as under msprof. When torch_npu is imported
(PyTorch autoloads it with `import torch`) a torch_npu.profiler.profile starts; every optimizer step
marks the end of a training step; at exit the session is written with tensorboard_trace_handler into
the directory, as `<host>_<pid>_<timestamp>_ascend_pt/`.
"""

import atexit
import os
import warnings

__all__ = ["OPTIONS", "ENV_OUTPUT", "ENV_OPTIONS", "parse_options", "start_from_env"]

ENV_OUTPUT = "VNPU_PROFILE_OUTPUT"
ENV_OPTIONS = "VNPU_PROFILE_OPTIONS"
OPTIONS = ("record_shapes", "profile_memory", "with_stack", "with_modules", "with_flops")
_active = None


def parse_options(text):
    """{"record_shapes": bool, ...} from a comma list; ValueError names an unknown option."""
    chosen = [o.strip() for o in (text or "").split(",") if o.strip()]
    unknown = [o for o in chosen if o not in OPTIONS]
    if unknown:
        raise ValueError(f"{ENV_OPTIONS}: unknown option(s) {', '.join(unknown)}; choose from {', '.join(OPTIONS)}")
    return {o: o in chosen for o in OPTIONS}


def _every_step(_):
    from torch_npu.profiler.scheduler import ProfilerAction

    return ProfilerAction.RECORD


def start_from_env():
    """Starts the whole-program profile when VNPU_PROFILE_OUTPUT is set (once per process)."""
    global _active
    output = os.environ.get(ENV_OUTPUT)
    if not output or _active is not None:
        return None
    try:
        options = parse_options(os.environ.get(ENV_OPTIONS))
    except ValueError as e:
        warnings.warn(f"{e}; profiling without options")
        options = parse_options("")
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from torch_npu import profiler

    prof = profiler.profile(schedule=_every_step, on_trace_ready=profiler.tensorboard_trace_handler(output), **options)
    prof._records_under_msprof = True  # the program's own profiler calls record nothing meanwhile, as under msprof
    prof.add_metadata("vnpu_program_profile", "1")
    register_optimizer_step_post_hook(lambda *_: prof.step())
    prof.start()
    _active = prof
    atexit.register(_finish)
    return prof


def _finish():
    global _active
    if _active is not None:
        prof, _active = _active, None
        prof.stop()
