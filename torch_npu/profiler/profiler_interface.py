"""torch_npu.profiler.profiler_interface (module of the real package): the supported activities."""

from torch_npu.profiler.profiler import supported_activities

__all__ = ["supported_activities"]
