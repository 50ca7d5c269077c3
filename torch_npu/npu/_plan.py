"""What a process run in planning mode (VNPU_PLAN=1) leaves for ``vnpu plan``: at exit it writes
``$VNPU_PLAN_REPORT/plan_<pid>.json`` with the SoC it modelled, each device's allocator statistics, where
its allocated memory peaked (operator and program line), every operator with its shapes and calls, and
the collectives of the hccl backend (kind, ranks, bytes)."""

import atexit
import json
import os

import torch

from torch_npu import _C

_STATS = (
    "allocated_bytes.all.peak",
    "reserved_bytes.all.peak",
    "allocated_bytes.all.current",
    "reserved_bytes.all.current",
    "active_bytes.all.peak",
    "num_alloc_retries",
    "num_ooms",
    "segment.all.peak",
)


def _devices():
    used = []
    for index in range(torch.npu.device_count()):
        stats = torch.npu.memory_stats(index)
        if stats.get("reserved_bytes.all.peak", 0) > 0:
            used.append({"device": index, **{key: stats.get(key, 0) for key in _STATS}})
    return used


def write(directory):
    peaks = _C._plan_peaks()
    report = {
        "pid": os.getpid(),
        "rank": int(os.environ.get("RANK", "0")),
        "soc": _C._soc_profile(),
        "devices": [],
        "operators": [list(row) for row in _C._plan_ledger()],
        "collectives": [
            {key: c[key] for key in ("kind", "group", "rank", "size", "bytes", "dtype")} for c in _C._collective_stop()
        ],
    }
    for device in _devices():
        _, op, site = peaks.get(device["device"], (0, "", ""))
        report["devices"].append({**device, "peak_operator": op, "peak_site": site})
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"plan_{os.getpid()}.json"), "w") as f:
        json.dump(report, f)


def install():
    """Called at import in planning mode: record collectives, write the report at exit."""
    directory = os.environ.get("VNPU_PLAN_REPORT")
    if not directory:
        return
    _C._collective_start()
    atexit.register(write, directory)
