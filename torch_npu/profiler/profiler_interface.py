"""torch_npu.profiler.profiler_interface (module of the real package): the supported activities, and the switches
that put torch.npu.Event calls into the profile while it records."""

from torch_npu.profiler.event_record import _disable_event_record, _enable_event_record  # noqa: F401
from torch_npu.profiler.profiler import supported_activities

__all__ = ["supported_activities"]
