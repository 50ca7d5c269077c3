"""trace_view.json: one profiling session as Chrome trace events, loadable in Perfetto and chrome://tracing,
laid out as torch_npu writes it so that Ascend's tools (msprof-analyze) read it.

Process "Python" holds the host lanes: the operators as issued (from PyTorch's CPU profiler when CPU
activity was recorded, else from the npu operators themselves), record_function / mstx ranges,
ProfilerStep#N (category cpu_op, as torch_npu records them), and Python frames with with_stack. Per
device: an "Ascend Hardware" process with its kernels, a lane per stream, each linked from its host
operator by a `torch_to_npu` flow; an "HCCL" process with a "Communication" lane per process group
holding its collectives; an "Overlap Analysis" process with the Computing / Communication /
Communication(Not Overlapped) / Free lanes of overlap.py. At Level1 / Level2 a "CANN" process holds the
runtime calls of cann_api.py, each launch linked to its kernel by a `HostToDevice` flow. With profile_memory, counter tracks show the
device's allocated and reserved memory. `ts` is numeric, in microseconds since the UNIX epoch (the
clock of kernel_details.csv); flow ids count from 1.
"""

from torch_npu.profiler import cann_api
from torch_npu.profiler.overlap import LANES, device_split, session_windows
from torch_npu.profiler.session import core_of, op_type

__all__ = ["trace_events"]


def _us(ns, offset):
    """Steady-clock ns to epoch microseconds."""
    return round((ns + offset) / 1000.0, 3)


def _host_args(event):
    args = {}
    if event.get("shapes") is not None:
        args["Input Dims"] = event["shapes"]
        args["Input type"] = event.get("dtypes", [])
    if event.get("stack"):
        args["Call stack"] = ";\r\n".join(event["stack"])
    if event.get("flops"):
        args["flops"] = event["flops"]
    return args


def trace_events(session):
    t0, pid = session["epoch_offset_ns"], session["pid"]
    activities, host = session["activities"], session["host_events"]
    events = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": 0}},
    ]
    threads = {}

    def tid_of(thread):
        return threads.setdefault(thread, len(threads) + 1)

    if host:
        lanes = host
    else:  # without CPU activity the host lane shows the npu operators as issued
        lanes = [
            {
                "name": a["name"],
                "cat": "cpu_op",
                "start_ns": a["start_ns"],
                "end_ns": a["end_ns"],
                "thread": a["thread"],
                "shapes": [t[0] for t in a["inputs"]] if a["inputs"] else None,
                "dtypes": [t[1] for t in a["inputs"]],
            }
            for a in activities
        ]
    for number, start, end in session["steps"] if session["has_steps"] else ():
        events.append(
            {
                "ph": "X",
                "name": f"ProfilerStep#{number}",
                "pid": pid,
                "tid": tid_of(session["main_thread"]),
                "ts": _us(start, t0),
                "dur": round((end - start) / 1000.0, 3),
                "cat": "cpu_op",
                "args": {},
            }
        )
    for e in lanes:
        events.append(
            {
                "ph": "X",
                "name": e["name"],
                "pid": pid,
                "tid": tid_of(e["thread"]),
                "ts": _us(e["start_ns"], t0),
                "dur": round((e["end_ns"] - e["start_ns"]) / 1000.0, 3),
                "cat": e["cat"],
                "args": _host_args(e),
            }
        )

    collectives = session.get("collectives", [])
    devices = sorted(
        {a["device"] for a in activities} | {m[5] for m in session["memory"]} | {c["device"] for c in collectives}
    )
    device_pid = {d: pid + 1 + 3 * i for i, d in enumerate(devices)}
    for d, dpid in device_pid.items():
        for offset, name in enumerate(("Ascend Hardware", "HCCL", "Overlap Analysis")):
            events += [
                {"ph": "M", "name": "process_name", "pid": dpid + offset, "tid": 0, "args": {"name": name}},
                {"ph": "M", "name": "process_labels", "pid": dpid + offset, "tid": 0, "args": {"labels": f"NPU {d}"}},
                {
                    "ph": "M",
                    "name": "process_sort_index",
                    "pid": dpid + offset,
                    "tid": 0,
                    "args": {"sort_index": 1 + 3 * d + offset},
                },
            ]
        events += _communication_events(session, d, dpid + 1, t0)
        events += _overlap_events(session, d, dpid + 2, t0)
    streams = set()
    parents = session["kernel_parents"]
    flow = 0
    for i, a in enumerate(activities):
        dpid = device_pid[a["device"]]
        streams.add((dpid, a["stream"]))
        ts, dur = _us(a["start_ns"], t0), round((a["end_ns"] - a["start_ns"]) / 1000.0, 3)
        events.append(
            {
                "ph": "X",
                "name": op_type(a["name"]),
                "pid": dpid,
                "tid": a["stream"],
                "ts": ts,
                "dur": dur,
                "cat": "kernel",
                "args": {
                    "Accelerator Core": core_of(a),
                    "Task Type": core_of(a),
                    "Stream Id": a["stream"],
                    "Task Id": i,
                    "Op Full Name": a["name"],
                },
            }
        )
        source = lanes[parents[i]] if host and parents[i] is not None else (None if host else lanes[i])
        if source is None:
            continue
        flow += 1
        events.append(
            {
                "ph": "s",
                "id": flow,
                "name": "torch_to_npu",
                "cat": "async_npu",
                "pid": pid,
                "tid": tid_of(source["thread"]),
                "ts": _us(source["start_ns"], t0),
            }
        )
        events.append(
            {
                "ph": "f",
                "id": flow,
                "name": "torch_to_npu",
                "cat": "async_npu",
                "pid": dpid,
                "tid": a["stream"],
                "ts": ts,
                "bp": "e",
            }
        )
    if cann_api.recorded(session):
        events += _cann_events(session, pid + 1 + 3 * len(devices), device_pid, t0, flow)
    for dpid, stream in sorted(streams):
        events.append(
            {"ph": "M", "name": "thread_name", "pid": dpid, "tid": stream, "args": {"name": f"Stream {stream}"}}
        )
    for m in session["memory"]:
        allocated, reserved, device, time_ns = m[2], m[3], m[5], m[7]
        events.append(
            {
                "ph": "C",
                "name": "NPU Memory",
                "pid": device_pid[device],
                "tid": 0,
                "ts": _us(time_ns, t0),
                "args": {"Allocated(MB)": round(allocated / 2**20, 4), "Reserved(MB)": round(reserved / 2**20, 4)},
            }
        )
    for thread, tid in threads.items():
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": f"Thread {thread}"}})
    return events


def _cann_events(session, cann_pid, device_pid, t0, flow):
    """The "CANN" process: a lane per host thread with its runtime calls; flows continue from `flow`."""
    events = [
        {"ph": "M", "name": "process_name", "pid": cann_pid, "tid": 0, "args": {"name": "CANN"}},
        {"ph": "M", "name": "process_labels", "pid": cann_pid, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_sort_index", "pid": cann_pid, "tid": 0, "args": {"sort_index": 0}},
    ]
    lanes = {}
    activities = session["activities"]
    for call in cann_api.calls(session):
        tid = lanes.setdefault(call["thread"], len(lanes) + 1)
        ts = _us(call["start_ns"], t0)
        events.append(
            {
                "ph": "X",
                "name": call["name"],
                "pid": cann_pid,
                "tid": tid,
                "ts": ts,
                "dur": round((call["end_ns"] - call["start_ns"]) / 1000.0, 3),
                "args": {"Thread Id": call["thread"], "level": call["level"], "id": call["api"]},
            }
        )
        if call["kernel"] is None:
            continue
        kernel = activities[call["kernel"]]
        flow += 1
        link = {"id": flow, "name": "HostToDevice", "cat": "HostToDevice"}
        events.append({"ph": "s", **link, "pid": cann_pid, "tid": tid, "ts": ts})
        events.append(
            {
                "ph": "f",
                **link,
                "pid": device_pid[kernel["device"]],
                "tid": kernel["stream"],
                "ts": _us(kernel["start_ns"], t0),
                "bp": "e",
            }
        )
    for thread, tid in lanes.items():
        events.append(
            {"ph": "M", "name": "thread_name", "pid": cann_pid, "tid": tid, "args": {"name": f"Thread {thread}"}}
        )
    return events


def _communication_events(session, device, hccl_pid, t0):
    """A "Group <name> Communication" lane per process group with its collectives (hccl records)."""
    records = [c for c in session.get("collectives", []) if c["device"] == device]
    groups = sorted({c["group"] for c in records})
    events = []
    for tid, group in enumerate(groups, start=1):
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": hccl_pid,
                "tid": tid,
                "args": {"name": f"Group {group} Communication"},
            }
        )
        events.append(
            {"ph": "M", "name": "thread_sort_index", "pid": hccl_pid, "tid": tid, "args": {"sort_index": tid}}
        )
        for c in records:
            if c["group"] != group:
                continue
            events.append(
                {
                    "ph": "X",
                    "name": c["name"],
                    "pid": hccl_pid,
                    "tid": tid,
                    "ts": _us(c["start_ns"], t0),
                    "dur": round((c["end_ns"] - c["start_ns"]) / 1000.0, 3),
                    "cat": "communication",
                    "args": {
                        "group_name": group,
                        "data_type": c["dtype"],
                        "count": c["count"],
                        "size(Byte)": c["bytes"],
                        "rank": c["rank"],
                        "rank_size": c["size"],
                    },
                }
            )
    return events


def _overlap_events(session, device, overlap_pid, t0):
    """The Overlap Analysis lanes of `device` over its steps."""
    events = [
        {"ph": "M", "name": "thread_name", "pid": overlap_pid, "tid": tid, "args": {"name": lane}}
        for tid, lane in enumerate(LANES)
    ]
    for _, start, end in session_windows(session):
        for tid, (lane, intervals) in enumerate(device_split(session, device, start, end).items()):
            for s, e in intervals:
                events.append(
                    {
                        "ph": "X",
                        "name": lane,
                        "pid": overlap_pid,
                        "tid": tid,
                        "ts": _us(s, t0),
                        "dur": round((e - s) / 1000.0, 3),
                        "cat": "overlap_analysis",
                        "args": {},
                    }
                )
    return events
