"""The profiler's native interface, torch_npu._C._profiler: the configuration object the profiler starts
with and the host clocks its records are stamped with. vnpu has no system counter (syscnt) on the host,
so records use the monotonic clock, as torch_npu does when syscnt is unavailable."""

import time

__all__ = []


class ExperimentalConfig:
    """The configuration torch_npu's C++ profiler receives (torch_npu._C._profiler._ExperimentalConfig)."""

    def __init__(
        self,
        trace_level="Level0",
        metrics="ACL_AICORE_NONE",
        l2_cache=False,
        record_op_args=False,
        msprof_tx=False,
        op_attr=False,
        host_sys=(),
        mstx_domain_include=(),
        mstx_domain_exclude=(),
        sys_io=False,
        sys_interconnection=False,
    ):
        self.trace_level = trace_level
        self.metrics = metrics
        self.l2_cache = l2_cache
        self.record_op_args = record_op_args
        self.msprof_tx = msprof_tx
        self.op_attr = op_attr
        self.host_sys = list(host_sys)
        self.mstx_domain_include = list(mstx_domain_include)
        self.mstx_domain_exclude = list(mstx_domain_exclude)
        self.sys_io = sys_io
        self.sys_interconnection = sys_interconnection

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"_ExperimentalConfig({fields})"


def _get_monotonic():
    """Nanoseconds of the monotonic clock."""
    return time.monotonic_ns()


def _get_syscnt_enable():
    """Whether records carry system-counter cycles (no: vnpu stamps them with the monotonic clock)."""
    return False


def _get_syscnt():
    """The system counter; without one, the monotonic clock in nanoseconds."""
    return time.monotonic_ns()


def _get_freq():
    """Counter frequency in MHz: the monotonic clock counts nanoseconds (1000 MHz)."""
    return 1000


def members():
    """The names torch_npu._C._profiler holds."""
    from torch_npu.profiler.profiler import ProfilerActivity, supported_activities

    return {
        "_ExperimentalConfig": ExperimentalConfig,
        "ProfilerActivity": ProfilerActivity,
        "_supported_npu_activities": supported_activities,
        "_get_monotonic": _get_monotonic,
        "_get_syscnt_enable": _get_syscnt_enable,
        "_get_syscnt": _get_syscnt,
        "_get_freq": _get_freq,
    }
