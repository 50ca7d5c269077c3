"""Writing a profiling session in torch_npu's layout: `<worker>_<YYYYmmddHHMMSSfff>_ascend_pt/` with
profiler_info.json, profiler_metadata.json and ASCEND_PROFILER_OUTPUT/ (trace_view.json,
kernel_details.csv, operator_details.csv, op_statistic.csv, step_trace_time.csv), the csv headers
exactly torch_npu's.

On vnpu an operator's "device" execution is its CPU kernel: kernel rows carry the times the C++ core
measured around it. Accelerator Core says where Ascend would run it: AI_CORE for the cube operators
(matmul, convolution), AI_CPU for those the active operator-support profile sends to the CPU fallback,
AI_VECTOR_CORE otherwise. trace_view.json has numeric `ts` in microseconds from the session start (it
loads in Perfetto and chrome://tracing) and flow ids counting from 1.
"""
import collections
import csv
import datetime
import json
import os
import socket

__all__ = ["write_session"]

KERNEL_HEADER = ["Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)",
                 "Block Num"]
SHAPE_HEADER = ["Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                "Output Formats"]
OPERATOR_HEADER = ["Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
                   "Device Self Duration(us)", "Device Total Duration(us)", "Device Self Duration With AICore(us)",
                   "Device Total Duration With AICore(us)"]
STATISTIC_HEADER = ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)",
                    "Ratio(%)"]
STEP_HEADER = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free",
               "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
_CUBE = ("mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "convolution", "_convolution",
         "convolution_backward", "_scaled_dot_product_flash_attention_for_cpu")


def _op_type(name):
    return name.split("::")[-1].split(".")[0]


def _core(activity):
    if activity["cpu_fallback"]:
        return "AI_CPU"
    return "AI_CORE" if _op_type(activity["name"]) in _CUBE else "AI_VECTOR_CORE"


def _join(values, fmt):
    return ";".join(fmt(v) for v in values)


def _shape(t):
    return ",".join(str(d) for d in t[0])


def _write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def _us(ns):
    return round(ns / 1000.0, 3)


def worker_dir(dir_name, worker_name):
    stamp = datetime.datetime.now().strftime("%Y%m%d%H%M%S%f")[:-3]
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
    return os.path.join(dir_name, f"{worker}_{stamp}_ascend_pt")


def _trace_events(activities, t0_ns, host_pid):
    events = [{"ph": "M", "name": "process_name", "pid": host_pid, "tid": 0, "args": {"name": "Python"}},
              {"ph": "M", "name": "process_labels", "pid": host_pid, "tid": 0, "args": {"labels": "CPU"}}]
    devices = sorted({a["device"] for a in activities})
    device_pid = {d: host_pid + 1 + i for i, d in enumerate(devices)}
    for d, pid in device_pid.items():
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": f"Ascend Hardware (npu:{d})"}})
    threads = {}
    for flow, a in enumerate(activities, start=1):
        tid = threads.setdefault(a["thread"], len(threads) + 1)
        ts, dur = (a["start_ns"] - t0_ns) / 1000.0, (a["end_ns"] - a["start_ns"]) / 1000.0
        args = {"Sequence number": flow}
        if a["inputs"]:
            args["Input Dims"] = [list(t[0]) for t in a["inputs"]]
            args["Input type"] = [t[1] for t in a["inputs"]]
        events.append({"ph": "X", "name": a["name"], "pid": host_pid, "tid": tid, "ts": ts, "dur": dur,
                       "cat": "cpu_op", "args": args})
        pid = device_pid[a["device"]]
        events.append({"ph": "X", "name": _op_type(a["name"]), "pid": pid, "tid": a["stream"], "ts": ts, "dur": dur,
                       "cat": "kernel", "args": {"Accelerator Core": _core(a), "Stream Id": a["stream"]}})
        events.append({"ph": "s", "id": flow, "name": "torch_to_npu", "cat": "async_npu", "pid": host_pid,
                       "tid": tid, "ts": ts})
        events.append({"ph": "f", "id": flow, "name": "torch_to_npu", "cat": "async_npu", "pid": pid,
                       "tid": a["stream"], "ts": ts, "bp": "e"})
    for thread, tid in threads.items():
        events.append({"ph": "M", "name": "thread_name", "pid": host_pid, "tid": tid,
                       "args": {"name": f"Thread {thread % 100000}"}})
    return events


def write_session(path, activities, *, t0_ns, epoch_offset_ns, steps, record_shapes, config, metadata):
    """Write one session into `path` (a `..._ascend_pt` directory). `steps`: [(step number, start_ns,
    end_ns)] (empty without a schedule). Returns the ASCEND_PROFILER_OUTPUT directory."""
    out = os.path.join(path, "ASCEND_PROFILER_OUTPUT")
    os.makedirs(out, exist_ok=True)

    def step_of(a):
        for number, start, end in steps:
            if start <= a["start_ns"] < end:
                return number
        return ""

    header = (["Step Id"] if steps else []) + KERNEL_HEADER + (SHAPE_HEADER if record_shapes else [])
    kernel_rows, previous_end = [], {}
    for a in activities:
        key = (a["device"], a["stream"])
        wait = max(0, a["start_ns"] - previous_end[key]) if key in previous_end else 0
        previous_end[key] = a["end_ns"]
        row = ([step_of(a)] if steps else []) + [
            a["device"], _op_type(a["name"]), _op_type(a["name"]), _core(a), _us(a["start_ns"] + epoch_offset_ns),
            _us(a["end_ns"] - a["start_ns"]), _us(wait), 1]
        if record_shapes:
            ins, outs = a["inputs"], a["outputs"]
            row += [_join(ins, _shape), _join(ins, lambda t: t[1]), _join(ins, lambda t: str(t[2])),
                    _join(outs, _shape), _join(outs, lambda t: t[1]), _join(outs, lambda t: str(t[2]))]
        kernel_rows.append(row)
    _write_csv(os.path.join(out, "kernel_details.csv"), header, kernel_rows)

    operator_rows = []
    for a in activities:
        dur = _us(a["end_ns"] - a["start_ns"])
        with_aicore = 0.0 if a["cpu_fallback"] else dur
        operator_rows.append([a["name"], _join(a["inputs"], lambda t: "[" + _shape(t) + "]"), "", dur, dur, dur, dur,
                              with_aicore, with_aicore])
    _write_csv(os.path.join(out, "operator_details.csv"), OPERATOR_HEADER, operator_rows)

    groups = collections.defaultdict(list)
    for a in activities:
        groups[(_op_type(a["name"]), _core(a))].append((a["end_ns"] - a["start_ns"]) / 1000.0)
    total = sum(sum(v) for v in groups.values()) or 1.0
    statistic_rows = sorted(([t, core, len(v), round(sum(v), 3), round(min(v), 3), round(sum(v) / len(v), 3),
                              round(max(v), 3), round(100.0 * sum(v) / total, 2)]
                             for (t, core), v in groups.items()), key=lambda r: -r[3])
    _write_csv(os.path.join(out, "op_statistic.csv"), STATISTIC_HEADER, statistic_rows)

    step_rows = []
    spans = steps or ([("", activities[0]["start_ns"], activities[-1]["end_ns"])] if activities else [])
    for device in sorted({a["device"] for a in activities}) or [0]:
        for number, start, end in spans:
            computing = sum(a["end_ns"] - a["start_ns"] for a in activities
                            if a["device"] == device and start <= a["start_ns"] < end) / 1000.0
            free = max(0.0, (end - start) / 1000.0 - computing)
            step_rows.append([device, number, round(computing, 3), 0, 0, 0, round(free, 3), 0, 0, 0, 0])
    _write_csv(os.path.join(out, "step_trace_time.csv"), STEP_HEADER, step_rows)

    with open(os.path.join(out, "trace_view.json"), "w") as f:
        json.dump(_trace_events(activities, t0_ns, os.getpid()), f)
    with open(os.path.join(path, "profiler_info.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(path, "profiler_metadata.json"), "w") as f:
        json.dump(metadata, f, indent=1)
    return out
