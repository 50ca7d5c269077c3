"""torch_npu.profiler: npu operators profiled from the C++ core and written in torch_npu's files.

Implemented so far: profile (schedule, on_trace_ready, record_shapes, metadata), schedule /
ProfilerAction, tensorboard_trace_handler, _ExperimentalConfig with its enums and supported_* functions,
and the files profiler_info.json, profiler_metadata.json, ASCEND_PROFILER_OUTPUT/{trace_view.json,
kernel_details.csv, operator_details.csv, op_statistic.csv, step_trace_time.csv}."""
from torch_npu.profiler.experimental_config import (AiCMetrics, ExportType, HostSystem, ProfilerLevel,
                                                    _ExperimentalConfig, supported_ai_core_metrics,
                                                    supported_export_type, supported_profiler_level)
from torch_npu.profiler.profiler import ProfilerActivity, profile, supported_activities, tensorboard_trace_handler
from torch_npu.profiler.scheduler import ProfilerAction, schedule

__all__ = ["profile", "ProfilerActivity", "ProfilerAction", "schedule", "tensorboard_trace_handler",
           "supported_activities", "supported_profiler_level", "supported_ai_core_metrics", "supported_export_type",
           "ProfilerLevel", "AiCMetrics", "ExportType", "HostSystem", "_ExperimentalConfig"]
