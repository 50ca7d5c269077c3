"""torch_npu.profiler's experimental configuration: levels, AI Core metrics, export types, host
system metrics (string-valued, as torch_npu's), and the `_ExperimentalConfig` that carries them.
vnpu records operator-level device activity at every level. As torch_npu, an invalid value is not an error:
the profiler prints a warning (behind torch_npu's warning gate) and resets it to its default; calling the
config gives the torch_npu._C._profiler._ExperimentalConfig the profiler starts with."""

from torch_npu.profiler._native import ExperimentalConfig as _CExperimentalConfig
from torch_npu.profiler.analysis.prof_common_func._cann_package_manager import CannPackageManager
from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_info_msg, print_warn_msg

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
    Level0 = Constant.LEVEL0
    Level1 = Constant.LEVEL1
    Level2 = Constant.LEVEL2
    Level_none = Constant.LEVEL_NONE


class AiCMetrics:
    PipeUtilization = Constant.AicPipeUtilization
    ArithmeticUtilization = Constant.AicArithmeticUtilization
    Memory = Constant.AicMemory
    MemoryL0 = Constant.AicMemoryL0
    MemoryUB = Constant.AicMemoryUB
    ResourceConflictRatio = Constant.AicResourceConflictRatio
    L2Cache = Constant.AicL2Cache
    MemoryAccess = Constant.AicMemoryAccess
    AiCoreNone = Constant.AicMetricsNone


class ExportType:
    Db = Constant.Db
    Text = Constant.Text


class HostSystem:
    CPU = Constant.CPU
    MEM = Constant.MEM
    DISK = Constant.DISK
    NETWORK = Constant.NETWORK
    OSRT = Constant.OSRT
    NUMA = Constant.NUMA


def _values(cls):
    return {v for k, v in vars(cls).items() if not k.startswith("_")}


def supported_profiler_level() -> set:
    return _values(ProfilerLevel)


def supported_ai_core_metrics() -> set:
    return _values(AiCMetrics)


def supported_export_type() -> set:
    return _values(ExportType)


def _bool_or_reset(value, name, default=False):
    if isinstance(value, bool):
        return value
    print_warn_msg(f"Invalid parameter {name}, which must be of bool type, reset it to {default}.")
    return default


def _export_types(export_type):
    if isinstance(export_type, str) and export_type:
        types = [export_type]
    elif isinstance(export_type, list) and export_type and all(isinstance(t, str) for t in export_type):
        types = sorted(set(export_type))
    else:
        print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to text.")
        return [ExportType.Text]
    if not set(types) <= supported_export_type():
        print_warn_msg("Invalid parameter export_type, reset it to text.")
        return [ExportType.Text]
    return types


def _domains(value, name):
    if not value:
        return []
    if not isinstance(value, list) or not all(isinstance(domain, str) for domain in value):
        print_warn_msg(f"Invalid parameter {name}, which must be a list of str, reset it to default.")
        return []
    return sorted(set(value))


class _ExperimentalConfig:
    def __init__(
        self,
        profiler_level: str = ProfilerLevel.Level0,
        aic_metrics: str = AiCMetrics.PipeUtilization,
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
        record_flops: bool = False,
    ):
        if profiler_level not in supported_profiler_level():
            print_warn_msg("Invalid parameter profiler_level, reset it to ProfilerLevel.Level0.")
            profiler_level = ProfilerLevel.Level0
        if aic_metrics not in supported_ai_core_metrics():
            print_warn_msg("Invalid parameter aic_metrics, reset it to default.")
            aic_metrics = (
                AiCMetrics.AiCoreNone if profiler_level == ProfilerLevel.Level0 else AiCMetrics.PipeUtilization
            )
        if profiler_level in (ProfilerLevel.Level0, ProfilerLevel.Level_none) and aic_metrics != AiCMetrics.AiCoreNone:
            print_warn_msg("Please use level1 or level2 if you want to collect aic metrics, reset aic metrics to None!")
            aic_metrics = AiCMetrics.AiCoreNone
        self._profiler_level = profiler_level
        self._aic_metrics = aic_metrics
        self._l2_cache = _bool_or_reset(l2_cache, "l2_cache")
        self._msprof_tx = _bool_or_reset(msprof_tx, "msprof_tx")
        self._mstx = _bool_or_reset(mstx, "mstx")
        if profiler_level == ProfilerLevel.Level_none and not (self._mstx or self._msprof_tx):
            print_warn_msg("Parameter mstx or msprof_tx must be True if profiler_level is set to Level_none.")
            self._mstx = True
        self._data_simplification = _bool_or_reset(data_simplification, "data_simplification", True)
        self.record_op_args = _bool_or_reset(record_op_args, "record_op_args")
        self._export_type = _export_types(export_type)
        self._op_attr = _bool_or_reset(op_attr, "op_attr")
        if (
            self._op_attr
            and ExportType.Db not in self._export_type
            and not CannPackageManager.is_support_default_export_db()
        ):
            print_warn_msg("op_attr switch is invalid with export type set as text.")
            self._op_attr = False
        self._gc_detect_threshold = self._gc_threshold(gc_detect_threshold)
        self._sys_io = _bool_or_reset(sys_io, "sys_io")
        self._sys_interconnection = _bool_or_reset(sys_interconnection, "sys_interconnection")
        self._host_sys = self._host_systems(host_sys)
        self._mstx_domain_include, self._mstx_domain_exclude = self._mstx_domains(
            mstx_domain_include, mstx_domain_exclude
        )
        # the FLOPs of the registered functions' calls as mfu_flops ranges (their collection comes with it)
        self._record_flops = _bool_or_reset(record_flops, "record_flops")

    @staticmethod
    def _gc_threshold(threshold):
        if threshold is None:
            return None
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            print_warn_msg("Parameter gc_detect_threshold is not int or float type, reset it to default.")
            return None
        if threshold < 0:
            print_warn_msg("Parameter gc_detect_threshold can not be negative, reset it to default.")
            return None
        if threshold == 0:
            print_info_msg("Parameter gc_detect_threshold is set to 0, it will collect all gc events.")
        return threshold

    @staticmethod
    def _host_systems(host_sys):
        if not host_sys:
            return []
        if not isinstance(host_sys, list) or not all(item in _values(HostSystem) for item in host_sys):
            print_warn_msg(
                f"Invalid parameter host_sys, which must be a list of {sorted(_values(HostSystem))}, reset it to "
                "default."
            )
            return []
        return sorted(set(host_sys))

    def _mstx_domains(self, include, exclude):
        if not (self._msprof_tx or self._mstx):
            if include or exclude:
                print_warn_msg("mstx_domain_include and mstx_domain_exclude are valid when msprof_tx or mstx is True.")
            return [], []
        include, exclude = _domains(include, "mstx_domain_include"), _domains(exclude, "mstx_domain_exclude")
        if include and exclude:
            print_warn_msg("Parameter mstx_domain_include and mstx_domain_exclude are both set, only include is valid.")
            exclude = []
        return include, exclude

    def __call__(self):
        """The configuration torch_npu._C._profiler receives."""
        return _CExperimentalConfig(
            trace_level=self._profiler_level,
            metrics=self._aic_metrics,
            l2_cache=self._l2_cache,
            record_op_args=self.record_op_args,
            msprof_tx=self._msprof_tx or self._mstx,
            op_attr=self._op_attr,
            host_sys=list(self._host_sys),
            mstx_domain_include=list(self._mstx_domain_include),
            mstx_domain_exclude=list(self._mstx_domain_exclude),
            sys_io=self._sys_io,
            sys_interconnection=self._sys_interconnection,
        )

    @property
    def profiler_level(self):
        return self._profiler_level

    @property
    def aic_metrics(self):
        return self._aic_metrics

    @property
    def export_type(self):
        return self._export_type

    @property
    def with_gc(self):
        return self._gc_detect_threshold is not None

    @property
    def gc_detect_threshold(self):
        return self._gc_detect_threshold

    @property
    def tx_enabled(self):
        return self._msprof_tx or self._mstx

    @property
    def record_flops(self):
        return self._record_flops

    def collects_mstx_domain(self, domain):
        """Whether the profiler keeps the mstx marks and ranges of `domain`: with mstx / msprof_tx on, the domains
        mstx_domain_include lists (or all but those mstx_domain_exclude lists); mfu_flops with record_flops."""
        if domain == "mfu_flops" and self._record_flops:
            return True
        if not self.tx_enabled:
            return False
        if self._mstx_domain_include:
            return domain in self._mstx_domain_include
        return domain not in self._mstx_domain_exclude

    def to_dict(self):
        return {
            "_profiler_level": self._profiler_level,
            "_aic_metrics": self._aic_metrics,
            "_l2_cache": self._l2_cache,
            "_msprof_tx": self._msprof_tx,
            "_mstx": self._mstx,
            "_data_simplification": self._data_simplification,
            "_record_op_args": self.record_op_args,
            "_op_attr": self._op_attr,
            "_gc_detect_threshold": self._gc_detect_threshold,
            "_export_type": self._export_type,
            "_host_sys": self._host_sys,
            "_sys_io": self._sys_io,
            "_sys_interconnection": self._sys_interconnection,
            "_record_flops": self._record_flops,
        }
