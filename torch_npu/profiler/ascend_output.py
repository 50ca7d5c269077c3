"""Writing a profiling session in torch_npu's layout: `<worker>_<YYYYmmddHHMMSSfff>_ascend_pt/` with
profiler_info.json, profiler_metadata.json and ASCEND_PROFILER_OUTPUT/ (trace_view.json,
kernel_details.csv, operator_details.csv, op_statistic.csv, step_trace_time.csv, and with
profile_memory memory_record.csv, operator_memory.csv, npu_module_mem.csv, at Level1 / Level2
api_statistic.csv), the csv headers exactly torch_npu's.

On vnpu an operator's "device" execution is its CPU kernel: kernel rows carry the times the C++ core
measured around it. Accelerator Core says where Ascend would run it: AI_CORE for the cube operators
(matmul, convolution), AI_CPU for those the active operator-support profile sends to the CPU fallback,
AI_VECTOR_CORE otherwise. operator_details.csv has one row per host operator (with CPU activity) with
the device time of the kernels it issued, directly (self) and through the operators it called (total).
"""

import collections
import csv
import datetime
import json
import os
import socket

from torch_npu.profiler import cann_api
from torch_npu.profiler.communication import communication_tables
from torch_npu.profiler.db_export import write_databases
from torch_npu.profiler.device_info import write_device_info
from torch_npu.profiler.memory_output import (
    MEMORY_RECORD_HEADER,
    MODULE_MEM_HEADER,
    OPERATOR_MEMORY_HEADER,
    memory_tables,
)
from torch_npu.profiler.overlap import device_split, length, session_windows
from torch_npu.profiler.pmu_model import pmu_header, pmu_values
from torch_npu.profiler.roofline import soc_peaks
from torch_npu.profiler.session import cann_type, core_of, op_type
from torch_npu.profiler.timeline import nesting_parents
from torch_npu.profiler.trace_view import trace_events

__all__ = ["write_session", "write_metadata", "worker_dir", "step_rows"]

KERNEL_HEADER = [
    "Device_id",
    "Name",
    "Type",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Num",
]
# Level1 / Level2: msprof's op summary columns
DETAILED_KERNEL_HEADER = [
    "Device_id",
    "Model ID",
    "Task ID",
    "Stream ID",
    "Name",
    "Type",
    "OP State",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Dim",
    "Mix Block Dim",
    "HF32 Eligible",
]
SHAPE_HEADER = [
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
]
OPERATOR_HEADER = [
    "Name",
    "Input Shapes",
    "Call Stack",
    "Host Self Duration(us)",
    "Host Total Duration(us)",
    "Device Self Duration(us)",
    "Device Total Duration(us)",
    "Device Self Duration With AICore(us)",
    "Device Total Duration With AICore(us)",
]
STATISTIC_HEADER = [
    "OP Type",
    "Core Type",
    "Count",
    "Total Time(us)",
    "Min Time(us)",
    "Avg Time(us)",
    "Max Time(us)",
    "Ratio(%)",
]
STEP_HEADER = [
    "Device_id",
    "Step",
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
]


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
    """`<dir>/<worker>_<YYYYmmddHHMMSSfff>_ascend_pt`, a millisecond later while that name is taken (two
    sessions saved within one millisecond)."""
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
    moment = datetime.datetime.now()
    while True:
        path = os.path.join(dir_name, f"{worker}_{moment.strftime('%Y%m%d%H%M%S%f')[:-3]}_ascend_pt")
        if not os.path.exists(path):
            return path
        moment += datetime.timedelta(milliseconds=1)


def step_rows(session):
    """step_trace_time rows: per device and step, computing (npu kernels), communication (collectives in
    flight), their overlap, and free time, in microseconds."""
    rows = []
    for device in sorted({a["device"] for a in session["activities"]}) or [0]:
        for number, start, end in session_windows(session):
            split = device_split(session, device, start, end)
            comp, comm = length(split["Computing"]), length(split["Communication"])
            not_overlapped = length(split["Communication(Not Overlapped)"])
            over = comm - not_overlapped
            rows.append(
                [
                    device,
                    number,
                    _us(comp),
                    _us(not_overlapped),
                    _us(over),
                    _us(comm),
                    _us(length(split["Free"])),
                    0,
                    0,
                    _us(not_overlapped),
                    0,
                ]
            )
    return rows


def _operator_rows(session):
    activities, host = session["activities"], session["host_events"]
    if not host:
        rows = []
        for a in activities:
            dur = _us(a["end_ns"] - a["start_ns"])
            with_aicore = 0.0 if a["cpu_fallback"] else dur
            rows.append(
                [
                    a["name"],
                    _join(a["inputs"], lambda t: "[" + _shape(t) + "]"),
                    "",
                    dur,
                    dur,
                    dur,
                    dur,
                    with_aicore,
                    with_aicore,
                ]
            )
        return rows
    ops = [i for i, e in enumerate(host) if e["cat"] == "cpu_op"]
    parent = {i: (ops[p] if p is not None else None) for i, p in zip(ops, nesting_parents([host[i] for i in ops]))}
    device_self = collections.Counter()
    device_self_aicore = collections.Counter()
    for a, p in zip(activities, session["kernel_parents"]):
        if p is not None:
            device_self[p] += a["end_ns"] - a["start_ns"]
            device_self_aicore[p] += 0 if a["cpu_fallback"] else a["end_ns"] - a["start_ns"]
    children_host = collections.Counter()
    device_total, device_total_aicore = collections.Counter(device_self), collections.Counter(device_self_aicore)
    for i in reversed(ops):  # children end up before their callers in reverse order
        p = parent[i]
        if p is not None:
            children_host[p] += host[i]["end_ns"] - host[i]["start_ns"]
            device_total[p] += device_total[i]
            device_total_aicore[p] += device_total_aicore[i]
    rows = []
    for i in ops:
        e = host[i]
        total = e["end_ns"] - e["start_ns"]
        shapes = ";".join(str(s) for s in e.get("shapes") or [])
        rows.append(
            [
                e["name"],
                shapes,
                ";\r\n".join(e.get("stack") or []),
                _us(total - children_host[i]),
                _us(total),
                _us(device_self[i]),
                _us(device_total[i]),
                _us(device_self_aicore[i]),
                _us(device_total_aicore[i]),
            ]
        )
    return rows


# msprof's task summary (task_time.csv), one row per device task
TASK_TIME_HEADER = [
    "Device_id",
    "kernel_name",
    "kernel_type",
    "stream_id",
    "task_id",
    "task_time(us)",
    "task_start(us)",
    "task_stop(us)",
]


def _task_time_rows(activities, epoch_offset_ns):
    task_ids = collections.Counter()
    rows = []
    for a in activities:
        key = (a["device"], a["stream"])
        rows.append(
            [
                a["device"],
                op_type(a["name"]),
                core_of(a),
                a["stream"],
                task_ids[key],
                _us(a["end_ns"] - a["start_ns"]),
                _us(a["start_ns"] + epoch_offset_ns),
                _us(a["end_ns"] + epoch_offset_ns),
            ]
        )
        task_ids[key] += 1
    return rows


def write_session(path, session, export_type=None):
    """Write ASCEND_PROFILER_OUTPUT/ of one session (session.py's record) into `path`, a `..._ascend_pt`
    directory: the text files (ExportType.Text) and/or the databases (ExportType.Db) of `export_type`,
    by default the session's. Returns the ASCEND_PROFILER_OUTPUT directory."""
    out = os.path.join(path, "ASCEND_PROFILER_OUTPUT")
    os.makedirs(out, exist_ok=True)
    types = export_type if isinstance(export_type, list) else [export_type] if export_type else None
    types = types or session.get("export_type") or ["text"]
    if "db" in types:
        write_databases(out, session, session.get("rank_id", -1), step_rows(session))
    if "text" in types:
        _write_text(out, session)
    write_device_info(path, session)
    return out


def _write_text(out, session):
    activities, record_shapes, epoch_offset_ns = (
        session["activities"],
        session["record_shapes"],
        session["epoch_offset_ns"],
    )
    steps = session["steps"] if session["has_steps"] else []

    def step_of(a):
        for number, start, end in steps:
            if start <= a["start_ns"] < end:
                return number
        return ""

    detailed = session.get("profiler_level", "Level0") in ("Level1", "Level2")
    aic_metrics = session.get("aic_metrics", "ACL_AICORE_NONE") if detailed else "ACL_AICORE_NONE"
    pmu = pmu_header(aic_metrics)
    _, tflops, hbm_gbps = soc_peaks()
    basic = DETAILED_KERNEL_HEADER if detailed else KERNEL_HEADER
    header = (["Step Id"] if steps else []) + basic + (SHAPE_HEADER if record_shapes else []) + pmu
    jit_compile = session.get("jit_compile", False)
    kernel_rows, previous_end, task_ids = [], {}, collections.Counter()
    for a in activities:
        key = (a["device"], a["stream"])
        wait = max(0, a["start_ns"] - previous_end[key]) if key in previous_end else 0
        previous_end[key] = a["end_ns"]
        duration = _us(a["end_ns"] - a["start_ns"])
        timing = [core_of(a), _us(a["start_ns"] + epoch_offset_ns), duration, _us(wait)]
        if detailed:
            # Model ID, Task ID, Stream ID, Name, Type, OP State, ..., Block Dim, Mix Block Dim, HF32 Eligible
            state = "dynamic" if jit_compile else "static"
            row = [a["device"], 4294967295, task_ids[key], a["stream"], op_type(a["name"]), cann_type(a["name"]), state]
            row += timing + [1, 0, "NO"]
        else:
            row = [a["device"], op_type(a["name"]), cann_type(a["name"])] + timing + [1]
        task_ids[key] += 1
        row = ([step_of(a)] if steps else []) + row
        if record_shapes:
            ins, outs = a["inputs"], a["outputs"]
            row += [
                _join(ins, _shape),
                _join(ins, lambda t: t[1]),
                _join(ins, lambda t: str(t[2])),
                _join(outs, _shape),
                _join(outs, lambda t: t[1]),
                _join(outs, lambda t: str(t[2])),
            ]
        if pmu:
            row += pmu_values(
                aic_metrics, core_of(a), op_type(a["name"]), duration, a["inputs"], a["outputs"], tflops, hbm_gbps
            )
        kernel_rows.append(row)
    if session.get("npu_activity", True):  # device tables exist only when the NPU activity was profiled
        _write_csv(os.path.join(out, "kernel_details.csv"), header, kernel_rows)
        _write_csv(os.path.join(out, "task_time.csv"), TASK_TIME_HEADER, _task_time_rows(activities, epoch_offset_ns))
    _write_csv(os.path.join(out, "operator_details.csv"), OPERATOR_HEADER, _operator_rows(session))

    groups = collections.defaultdict(list)
    for a in activities:
        groups[(cann_type(a["name"]), core_of(a))].append((a["end_ns"] - a["start_ns"]) / 1000.0)
    total = sum(sum(v) for v in groups.values()) or 1.0
    statistic_rows = sorted(
        (
            [
                t,
                core,
                len(v),
                round(sum(v), 3),
                round(min(v), 3),
                round(sum(v) / len(v), 3),
                round(max(v), 3),
                round(100.0 * sum(v) / total, 2),
            ]
            for (t, core), v in groups.items()
        ),
        key=lambda r: -r[3],
    )
    _write_csv(os.path.join(out, "op_statistic.csv"), STATISTIC_HEADER, statistic_rows)
    _write_csv(os.path.join(out, "step_trace_time.csv"), STEP_HEADER, step_rows(session))
    if cann_api.recorded(session):
        _write_csv(
            os.path.join(out, "api_statistic.csv"), cann_api.API_STATISTIC_HEADER, cann_api.api_statistic_rows(session)
        )

    if session["profile_memory"]:
        records, blocks, modules = memory_tables(session)
        _write_csv(os.path.join(out, "memory_record.csv"), MEMORY_RECORD_HEADER, records)
        _write_csv(os.path.join(out, "operator_memory.csv"), OPERATOR_MEMORY_HEADER, blocks)
        _write_csv(os.path.join(out, "npu_module_mem.csv"), MODULE_MEM_HEADER, modules)
    with open(os.path.join(out, "trace_view.json"), "w") as f:
        json.dump(trace_events(session), f)
    tables = communication_tables(session)
    if tables is not None:
        for name, content in zip(("communication.json", "communication_matrix.json"), tables):
            with open(os.path.join(out, name), "w") as f:
                json.dump(content, f, indent=1)


def write_metadata(path, config, metadata):
    """profiler_info.json (profiler_info_<rank>.json with a rank) and profiler_metadata.json."""
    os.makedirs(path, exist_ok=True)
    rank = config.get("rank_id", -1)
    info = f"profiler_info_{rank}.json" if rank >= 0 else "profiler_info.json"
    with open(os.path.join(path, info), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(path, "profiler_metadata.json"), "w") as f:
        json.dump(metadata, f, indent=1)
