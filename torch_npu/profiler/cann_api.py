"""The CANN level of a Level1 / Level2 profile: the runtime calls that issued and awaited the device's
work, as Ascend's profiler records them from AscendCL and the node launcher.

Each kernel is issued by a `Node@launch` (level "node") on the thread that ran its host operator, each
copy between host and npu memory by `AscendCL@aclrtMemcpyAsync`; the synchronisations and event / stream
calls of the runtime (`AscendCL@aclrtSynchronizeStream`, ...; from `_C._runtime_api_stop()`) follow at
level "acl". On vnpu a launch runs its kernel before it returns, so a Node@launch spans the kernel, and a
synchronisation finds the work done: its duration is the runtime's own. trace_view.json shows these in
the "CANN" process, linked to their kernels by `HostToDevice` flows; api_statistic.csv sums them.
"""

import collections
import statistics

__all__ = ["API_STATISTIC_HEADER", "recorded", "calls", "api_statistic_rows"]

API_STATISTIC_HEADER = [
    "Device_id",
    "Level",
    "API Name",
    "Time(us)",
    "Count",
    "Avg(us)",
    "Min(us)",
    "Max(us)",
    "Variance",
]
_PREFIX = {"acl": "AscendCL", "node": "Node"}


def recorded(session):
    """Whether the session has a CANN level: the NPU activity profiled at Level1 or Level2."""
    return session.get("npu_activity", True) and session.get("profiler_level", "Level0") in ("Level1", "Level2")


def calls(session):
    """The CANN-level calls of a session, in time order: dicts with level, api, name ("Node@launch"),
    start_ns / end_ns (steady clock), thread, device and kernel (index of the activity it issued, or None)."""
    if not recorded(session):
        return []
    out = []
    for index, a in enumerate(session["activities"]):
        level, api = ("acl", "aclrtMemcpyAsync") if a["memcpy"] else ("node", "launch")
        out.append(_call(level, api, a["start_ns"], a["end_ns"], a["thread"], a["device"], index))
    for api, start_ns, end_ns, thread, device in session.get("runtime_api", []):
        out.append(_call("acl", api, start_ns, end_ns, thread, device, None))
    out.sort(key=lambda c: (c["start_ns"], c["end_ns"]))
    return out


def _call(level, api, start_ns, end_ns, thread, device, kernel):
    return {
        "level": level,
        "api": api,
        "name": f"{_PREFIX[level]}@{api}",
        "start_ns": start_ns,
        "end_ns": end_ns,
        "thread": thread,
        "device": device,
        "kernel": kernel,
    }


def api_statistic_rows(session):
    """api_statistic.csv: per device, level and API the total, count, mean, minimum, maximum (us) and
    population variance (us²) of the call durations, longest total first."""
    groups = collections.defaultdict(list)
    for c in calls(session):
        groups[(c["device"], c["level"], c["api"])].append((c["end_ns"] - c["start_ns"]) / 1000.0)
    rows = [
        [
            device,
            level,
            api,
            round(sum(v), 3),
            len(v),
            round(sum(v) / len(v), 3),
            round(min(v), 3),
            round(max(v), 3),
            round(statistics.pvariance(v), 3),
        ]
        for (device, level, api), v in groups.items()
    ]
    return sorted(rows, key=lambda r: (-r[3], r[0], r[1], r[2]))
