"""What torch_npu leaves behind for an out-of-memory error: OOM_SNAPSHOT_ENABLE and the device memory usage file.

OOM_SNAPSHOT_ENABLE (read when the device is initialised): 1 records every allocator event with its Python stack
from then on, 2 only the allocator state; either way an allocation that runs out of device memory first writes
`oom_snapshot_<pid>_<YYYYmmddHHMMSS>.pickle` (PyTorch's snapshot format, torch.cuda._memory_viz reads it) into
OOM_SNAPSHOT_PATH (default: the working directory; a path that does not exist makes the OOM fail with
"`OOM_SNAPSHOT_PATH` is invalid." instead), then raises the OutOfMemoryError.

torch_npu._C._npu_saveDevMemUsageInfo(device) writes `device_<device>_memUsageInfo_<YYYYmmddHHMMSS>.csv` there:
the device memory each component holds now and at its peak, in MB, largest first. On the card the runtime
reports its components (aclrtGetMemUsageInfo); on vnpu all device memory is held by the caching allocator, so it
is the one component.
"""

import os
import sys
import time

import torch_npu
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = []

_COMPONENT = "caching allocator"
_MB = 1024 * 1024


def _dump_directory():
    path = os.path.realpath(os.environ.get("OOM_SNAPSHOT_PATH", "./"))
    if not os.path.isdir(path):
        raise RuntimeError("`OOM_SNAPSHOT_PATH` is invalid." + pta_error(ErrCode.NOT_FOUND))
    return path


def _stamp():
    return time.strftime("%Y%m%d%H%M%S", time.localtime())


def dump_snapshot_at_oom(device, alloc, device_total, device_free):
    """The OOM observer OOM_SNAPSHOT_ENABLE attaches."""
    name = f"oom_snapshot_{os.getpid()}_{_stamp()}.pickle"
    torch_npu.npu.memory._dump_snapshot(os.path.join(_dump_directory(), name))


def enable_from_environment():
    """At device initialisation: OOM_SNAPSHOT_ENABLE 0 (or unset) does nothing, 2 records the allocator state,
    any other value every event; both dump a snapshot at an OOM."""
    try:
        level = int(os.environ.get("OOM_SNAPSHOT_ENABLE", "0"))
    except ValueError:  # what strtol reads from it
        level = 0
    if level == 0:
        return
    torch_npu._C._npu_attach_out_of_memory_observer(dump_snapshot_at_oom)
    torch_npu.npu.memory._record_memory_history(
        enabled="state" if level == 2 else "all", context="all", stacks="python", max_entries=sys.maxsize
    )


def save_device_memory_usage(device):
    """torch_npu._C._npu_saveDevMemUsageInfo: True once the file is written, False when it cannot be."""
    if isinstance(device, bool) or not isinstance(device, int):
        raise RuntimeError("invalid argument to save device mem usage info." + pta_error(ErrCode.PARAM))
    stats = torch_npu.npu.memory_stats(device)
    rows = [(_COMPONENT, stats.get("reserved_bytes.all.current", 0), stats.get("reserved_bytes.all.peak", 0))]
    path = os.path.join(_dump_directory(), f"device_{device}_memUsageInfo_{_stamp()}.csv")
    try:
        with open(path, "w") as f:
            f.write("moduleName,curMemSize(MB),memPeakSize(MB)\n")
            for name, current, peak in sorted(rows, key=lambda row: -row[1]):
                f.write(f"{name},{current / _MB:.4f},{peak / _MB:.4f}\n")
    except OSError:
        return False
    return True
