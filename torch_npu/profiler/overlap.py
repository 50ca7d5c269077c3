"""How a device's time splits, as Ascend's "Overlap Analysis" lanes and step_trace_time.csv show it:
Computing (kernels running), Communication (collectives in flight), Communication(Not Overlapped)
(communication while no kernel runs) and Free (neither), within each step (or the span of the
session's kernels when no schedule marked steps). Times are steady-clock nanoseconds."""

__all__ = ["LANES", "device_split", "session_windows", "communication_intervals"]

LANES = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")


def union(intervals):
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def length(merged):
    return sum(end - start for start, end in merged)


def intersection(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append([start, end])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def difference(a, b):
    """Merged intervals `a` minus merged intervals `b`."""
    out = []
    for start, end in a:
        cursor = start
        for s, e in b:
            if e <= cursor or s >= end:
                continue
            if s > cursor:
                out.append([cursor, s])
            cursor = max(cursor, e)
        if cursor < end:
            out.append([cursor, end])
    return out


def clip(intervals, start, end):
    return [(max(s, start), min(e, end)) for s, e in intervals if s < end and e > start]


def _is_communication(name):
    return name.startswith("c10d::") or "hccl" in name.lower()


def communication_intervals(session, device):
    """The collectives of `device` in flight: the hccl backend's records when it recorded them, else the
    c10d operators the host issued."""
    records = [c for c in session.get("collectives", []) if c["device"] == device]
    if records:
        return [(c["start_ns"], c["end_ns"]) for c in records]
    return [
        (e["start_ns"], e["end_ns"])
        for e in session["host_events"]
        if e["cat"] == "cpu_op" and _is_communication(e["name"])
    ]


def session_windows(session):
    """(step number, start_ns, end_ns) of each step; one unnamed window over the kernels without steps."""
    if session["has_steps"] and session["steps"]:
        return list(session["steps"])
    activities = session["activities"]
    if not activities:
        return []
    return [("", min(a["start_ns"] for a in activities), max(a["end_ns"] for a in activities))]


def device_split(session, device, start, end):
    """{lane: merged intervals} of `device` within [start, end)."""
    kernels = [(a["start_ns"], a["end_ns"]) for a in session["activities"] if a["device"] == device]
    computing = union(clip(kernels, start, end))
    communication = union(clip(communication_intervals(session, device), start, end))
    busy = union(computing + communication)
    return {
        "Computing": computing,
        "Communication": communication,
        "Communication(Not Overlapped)": difference(communication, computing),
        "Free": difference([[start, end]], busy),
    }
