"""The profiler's constants (levels, AI Core metric sets, export types, host system metrics) and its log
lines: ``[YYYY-mm-dd HH:MM:SS] [LEVEL] [pid] profiler.py: message`` on stdout, warnings behind torch_npu's
warning gate (TORCH_NPU_WARNING_DISABLE, RANK)."""

import os
import time

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

    ASCEND_PROFILER_OUTPUT = "ASCEND_PROFILER_OUTPUT"
    FRAMEWORK_DIR = "FRAMEWORK"


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
