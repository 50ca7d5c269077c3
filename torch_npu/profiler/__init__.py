"""torch_npu.profiler: npu operators profiled from the C++ core (device activity), host operators and
ranges from PyTorch's CPU profiler, allocator events with profile_memory, written in torch_npu's
`..._ascend_pt` layout and files; analyse() for offline parsing and dynamic_profile for profiling a
running job from a JSON file."""

from torch_npu.profiler import dynamic_profile
from torch_npu.profiler.analysis import analyse
from torch_npu.profiler.experimental_config import (
    AiCMetrics,
    ExportType,
    HostSystem,
    ProfilerLevel,
    _ExperimentalConfig,
    supported_ai_core_metrics,
    supported_export_type,
    supported_profiler_level,
)
from torch_npu.profiler.profiler import (
    ProfilerActivity,
    _KinetoProfile,  # noqa: F401  (torch_npu.profiler._KinetoProfile: tools import it)
    profile,
    supported_activities,
    tensorboard_trace_handler,
)
from torch_npu.profiler.scheduler import ProfilerAction, schedule

__all__ = [
    "profile",
    "ProfilerActivity",
    "ProfilerAction",
    "schedule",
    "tensorboard_trace_handler",
    "supported_activities",
    "supported_profiler_level",
    "supported_ai_core_metrics",
    "supported_export_type",
    "ProfilerLevel",
    "AiCMetrics",
    "ExportType",
    "HostSystem",
    "_ExperimentalConfig",
    "analyse",
    "dynamic_profile",
]

from torch_npu.profiler._non_intrusive_profile import _NonIntrusiveProfile  # noqa: E402

_NonIntrusiveProfile.init()  # PROF_CONFIG_PATH / MSMONITOR_USE_DAEMON: dynamic profiling without code changes
del _NonIntrusiveProfile
