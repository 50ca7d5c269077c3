"""torch_npu.profiler's experimental configuration: levels, AI Core metrics, export types, host
system metrics (string-valued, as torch_npu's), and the `_ExperimentalConfig` that carries them.
vnpu records operator-level device activity at every level; the values are validated and written to
profiler_info.json as torch_npu writes them."""

__all__ = [
    "ProfilerLevel",
    "AiCMetrics",
    "ExportType",
    "HostSystem",
    "_ExperimentalConfig",
    "supported_profiler_level",
    "supported_ai_core_metrics",
    "supported_export_type",
]


class ProfilerLevel:
    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"
    Level_none = "Level_none"


class AiCMetrics:
    PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    ArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    Memory = "ACL_AICORE_MEMORY_BANDWIDTH"
    MemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    MemoryUB = "ACL_AICORE_MEMORY_UB"
    ResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    L2Cache = "ACL_AICORE_L2_CACHE"
    MemoryAccess = "ACL_AICORE_MEMORY_ACCESS"
    AiCoreNone = "ACL_AICORE_NONE"


class ExportType:
    Db = "db"
    Text = "text"


class HostSystem:
    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"
    OSRT = "osrt"
    NUMA = "numa"


def _values(cls):
    return {v for k, v in vars(cls).items() if not k.startswith("_")}


def supported_profiler_level() -> set:
    return _values(ProfilerLevel)


def supported_ai_core_metrics() -> set:
    return _values(AiCMetrics)


def supported_export_type() -> set:
    return _values(ExportType)


class _ExperimentalConfig:
    def __init__(
        self,
        profiler_level: int = ProfilerLevel.Level0,
        aic_metrics: int = AiCMetrics.PipeUtilization,
        l2_cache: bool = False,
        msprof_tx: bool = False,
        mstx: bool = False,
        data_simplification: bool = True,
        record_op_args: bool = False,
        op_attr: bool = False,
        gc_detect_threshold=None,
        export_type=ExportType.Text,
        host_sys=None,
        mstx_domain_include=None,
        mstx_domain_exclude=None,
        sys_io: bool = False,
        sys_interconnection: bool = False,
    ):
        if profiler_level not in supported_profiler_level():
            raise ValueError(
                f"profiler_level must be one of {sorted(supported_profiler_level())}, got " f"{profiler_level!r}"
            )
        if aic_metrics not in supported_ai_core_metrics():
            raise ValueError(f"aic_metrics must be one of {sorted(supported_ai_core_metrics())}, got {aic_metrics!r}")
        export_types = export_type if isinstance(export_type, list) else [export_type]
        if not set(export_types) <= supported_export_type():
            raise ValueError(f"export_type must be among {sorted(supported_export_type())}, got {export_type!r}")
        self.profiler_level = profiler_level
        self.aic_metrics = aic_metrics
        self.l2_cache = l2_cache
        self.msprof_tx = msprof_tx
        self.mstx = mstx
        self.data_simplification = data_simplification
        self.record_op_args = record_op_args
        self.op_attr = op_attr
        self.gc_detect_threshold = gc_detect_threshold
        self.export_type = export_types
        self.host_sys = list(host_sys or [])
        self.mstx_domain_include = list(mstx_domain_include or [])
        self.mstx_domain_exclude = list(mstx_domain_exclude or [])
        self.sys_io = sys_io
        self.sys_interconnection = sys_interconnection

    def to_dict(self):
        return {
            "_profiler_level": self.profiler_level,
            "_aic_metrics": self.aic_metrics,
            "_l2_cache": self.l2_cache,
            "_msprof_tx": self.msprof_tx,
            "_mstx": self.mstx,
            "_data_simplification": self.data_simplification,
            "_record_op_args": self.record_op_args,
            "_op_attr": self.op_attr,
            "_gc_detect_threshold": self.gc_detect_threshold,
            "_export_type": self.export_type,
            "_host_sys": self.host_sys,
            "_sys_io": self.sys_io,
            "_sys_interconnection": self.sys_interconnection,
        }
