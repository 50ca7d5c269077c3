"""The profiler's constants (levels, AI Core metric sets, export types, host system metrics), its log
lines: ``[YYYY-mm-dd HH:MM:SS] [LEVEL] [pid] profiler.py: message`` on stdout, warnings behind torch_npu's
warning gate (TORCH_NPU_WARNING_DISABLE, RANK), and the exact time conversions of its files (integer
nanoseconds to microseconds with three decimals, and back)."""

import os
import time

from torch_npu.utils._error_code import ErrCode, prof_error
from torch_npu.utils._warnings import should_print_warning

__all__ = []


class Constant:
    INVALID_VALUE = -1
    NULL_VALUE = 0

    LEVEL0 = "Level0"
    LEVEL1 = "Level1"
    LEVEL2 = "Level2"
    LEVEL_NONE = "Level_none"

    AicPipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    AicArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    AicMemory = "ACL_AICORE_MEMORY_BANDWIDTH"
    AicMemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    AicMemoryUB = "ACL_AICORE_MEMORY_UB"
    AicResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    AicL2Cache = "ACL_AICORE_L2_CACHE"
    AicMemoryAccess = "ACL_AICORE_MEMORY_ACCESS"
    AicMetricsNone = "ACL_AICORE_NONE"

    Db = "db"
    Text = "text"

    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"
    OSRT = "osrt"
    NUMA = "numa"

    NS_TO_US = 1000

    ASCEND_PROFILER_OUTPUT = "ASCEND_PROFILER_OUTPUT"
    FRAMEWORK_DIR = "FRAMEWORK"

    # what the msprof command line sets for the program it profiles (its configuration) and for dynamic profiling
    MSPROF_STATIC_ENV = "PROFILER_SAMPLECONFIG"
    MSPROF_DYNAMIC_ENV = "PROFILING_MODE"


class DbConstant:
    """Values of the profiler database: msprof's "no value" for an id or index column."""

    DB_INVALID_VALUE = 4294967295


def _line(level, message):
    stamp = time.strftime("[%Y-%m-%d %H:%M:%S]", time.localtime())
    print(f"{stamp} [{level}] [{os.getpid()}] profiler.py: {message}", flush=True)


def print_info_msg(message: str):
    _line("INFO", message)


def print_warn_msg(message: str):
    if should_print_warning():
        _line("WARNING", message)


def print_error_msg(message: str):
    _line("ERROR", message)


def _integer_ns(ns):
    if not isinstance(ns, int):
        raise RuntimeError("Input must be integer." + prof_error(ErrCode.TYPE))


def convert_ns2us_float(ns) -> float:
    """Integer nanoseconds as float microseconds (an infinite bound passes through)."""
    if abs(ns) == float("inf"):
        return ns
    _integer_ns(ns)
    return ns / Constant.NS_TO_US


def convert_ns2us_str(ns, tail="") -> str:
    """Integer nanoseconds as microseconds with exactly three decimals, as text (no float rounding), + tail."""
    if abs(ns) == float("inf"):
        return str(ns)
    _integer_ns(ns)
    sign, digits = ("-", str(-ns)) if ns < 0 else ("", str(ns))
    digits = digits.rjust(4, "0")
    return f"{sign}{digits[:-3]}.{digits[-3:]}{tail}"


def convert_us2ns(us, tail="\t") -> int:
    """Microseconds (text with up to three significant decimals, or a number) as integer nanoseconds."""
    whole, _, decimals = str(us).strip(tail).partition(".")
    if "." in decimals:
        raise RuntimeError("Invalid input us!" + prof_error(ErrCode.PARAM))
    return int(whole + decimals[:3].ljust(3, "0"))


def contact_2num(high_num: int, low_num: int) -> int:
    """Two 32-bit halves as one 64-bit number."""
    return high_num << 32 | low_num
