"""torch_npu's error-code suffix: ``[ERROR] <time> (PID:.., Device:.., RankID:..) ERRxxyyy <SUB> <msg>``.

``TORCH_NPU_COMPACT_ERROR_OUTPUT=1`` keeps only ``ERRxxyyy <SUB> <msg>``.
"""

import enum
import os
import time


class _SubModule(enum.IntEnum):
    PTA = 0
    OPS = 1
    DIST = 2
    GRAPH = 3
    PROF = 4


class ErrCode(enum.IntEnum):
    SUC = 0
    PARAM = 1
    TYPE = 2
    VALUE = 3
    PTR = 4
    INTERNAL = 5
    MEMORY = 6
    NOT_SUPPORT = 7
    NOT_FOUND = 8
    UNAVAIL = 9
    SYSCALL = 10
    TIMEOUT = 11
    PERMISSION = 12
    ACL = 100
    HCCL = 200
    GE = 300
    EXCEPT = 999

    @property
    def msg(self):
        return _MESSAGES[self]


_MESSAGES = {
    ErrCode.SUC: "success",
    ErrCode.PARAM: "invalid parameter",
    ErrCode.TYPE: "invalid type",
    ErrCode.VALUE: "invalid value",
    ErrCode.PTR: "invalid pointer",
    ErrCode.INTERNAL: "internal error",
    ErrCode.MEMORY: "memory error",
    ErrCode.NOT_SUPPORT: "feature not supported",
    ErrCode.NOT_FOUND: "resource not found",
    ErrCode.UNAVAIL: "resource unavailable",
    ErrCode.SYSCALL: "system call failed",
    ErrCode.TIMEOUT: "timeout error",
    ErrCode.PERMISSION: "permission error",
    ErrCode.ACL: "call acl api failed",
    ErrCode.HCCL: "call hccl api failed",
    ErrCode.GE: "call ge api failed",
    ErrCode.EXCEPT: "exception caught",
}


def _format(submodule: _SubModule, code: ErrCode) -> str:
    tag = f"ERR{int(submodule):02d}{int(code):03d} {submodule.name} {code.msg}"
    if os.environ.get("TORCH_NPU_COMPACT_ERROR_OUTPUT") == "1":
        return "\n" + tag
    rank = os.environ.get("RANK", "-1")
    device = -1
    try:
        import torch_npu

        if torch_npu.npu.is_initialized():
            device = torch_npu._C._current_device()
    except Exception:  # noqa: BLE001 - error formatting must never raise
        pass
    stamp = time.strftime("%Y-%m-%d-%H:%M:%S")
    return f"\n[ERROR] {stamp} (PID:{os.getpid()}, Device:{device}, RankID:{rank}) {tag}"


def pta_error(code: ErrCode) -> str:
    return _format(_SubModule.PTA, code)


def ops_error(code: ErrCode) -> str:
    return _format(_SubModule.OPS, code)


def dist_error(code: ErrCode) -> str:
    return _format(_SubModule.DIST, code)


def graph_error(code: ErrCode) -> str:
    return _format(_SubModule.GRAPH, code)


def prof_error(code: ErrCode) -> str:
    return _format(_SubModule.PROF, code)
