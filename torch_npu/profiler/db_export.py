"""ExportType.Db: the session as SQLite databases in ASCEND_PROFILER_OUTPUT, laid out as torch_npu and
msprof write them (written with the standard library's sqlite3, through prof_common_func._db_manager):

- `ascend_pytorch_profiler[_<rank>].db`: STRING_IDS (every text once, referenced by id), META_DATA
  (parallel_group_info), RANK_DEVICE_MAP, NPU_INFO, SESSION_TIME_INFO, STEP_TIME, PYTORCH_API (the host
  operators), CANN_API (the launch of each kernel and collective, joined to them by connectionId, and at
  Level1 / Level2 the runtime's synchronisations and event / stream calls of cann_api.py), TASK
  and COMPUTE_TASK_INFO (the kernels), COMMUNICATION_OP (the hccl collectives), CONNECTION_IDS (which launches
  each PYTORCH_API operator made: its connectionId is an id there), MSTX_EVENTS (the marks and ranges of
  torch_npu.npu.mstx with their domains), PYTORCH_CALLCHAINS (with_stack: each distinct Python stack of an operator,
  innermost frame at depth 0). Times are epoch nanoseconds.
- `analysis.db`: CommAnalyzerTime, CommAnalyzerBandwidth and CommAnalyzerMatrix (the contents of
  communication.json and communication_matrix.json) and StepTraceTime (step_trace_time.csv).
"""

import collections
import json
import os

from torch_npu.profiler import cann_api
from torch_npu.profiler.analysis.prof_common_func._id_manager import (
    CallChainIdManager,
    ConnectionIdManager,
    Str2IdManager,
)
from torch_npu.profiler.communication import communication_tables, group_hash
from torch_npu.profiler.session import cann_type, core_of, op_type

__all__ = ["write_databases", "profiler_db_name"]

_PROFILER_TABLES = {
    "STRING_IDS": "id INTEGER PRIMARY KEY, value TEXT",
    "META_DATA": "name TEXT, value TEXT",
    "RANK_DEVICE_MAP": "rankId INTEGER, deviceId INTEGER",
    "NPU_INFO": "id INTEGER, name TEXT",
    "SESSION_TIME_INFO": "startTimeNs INTEGER, endTimeNs INTEGER",
    "STEP_TIME": "id INTEGER, startNs INTEGER, endNs INTEGER",
    "ENUM_API_TYPE": "id INTEGER PRIMARY KEY, name TEXT",
    "PYTORCH_API": "startNs INTEGER, endNs INTEGER, globalTid INTEGER, connectionId INTEGER, name INTEGER, "
    "sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER, callchainId INTEGER, "
    "type INTEGER",
    "CANN_API": "startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER, connectionId INTEGER PRIMARY KEY, "
    "name INTEGER",
    "TASK": "startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER PRIMARY KEY, "
    "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER",
    "COMPUTE_TASK_INFO": "name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockDim INTEGER, mixBlockDim INTEGER, "
    "taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, inputShapes INTEGER, "
    "outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER, attrInfo INTEGER, opState INTEGER, "
    "hf32Eligible INTEGER",
    "COMMUNICATION_OP": "opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER, groupName INTEGER, "
    "opId INTEGER PRIMARY KEY, relay INTEGER, retry INTEGER, dataType INTEGER, algType INTEGER, count NUMERIC, "
    "opType INTEGER",
    "CONNECTION_IDS": "id INTEGER, connectionId INTEGER",
    "PYTORCH_CALLCHAINS": "id INTEGER, stack INTEGER, stackDepth INTEGER",
    "ENUM_MSTX_EVENT_TYPE": "id INTEGER PRIMARY KEY, name TEXT",
    "MSTX_EVENTS": "startNs INTEGER, endNs INTEGER, eventType INTEGER, rangeId INTEGER, category INTEGER, "
    "message INTEGER, globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER, connectionId INTEGER",
}
_ANALYSIS_TABLES = {
    "CommAnalyzerTime": "step TEXT, hccl_op_name TEXT, group_name TEXT, start_timestamp NUMERIC, elapsed_time NUMERIC, "
    "transit_time NUMERIC, wait_time NUMERIC, synchronization_time NUMERIC, idle_time NUMERIC, "
    "synchronization_time_ratio NUMERIC, wait_time_ratio NUMERIC",
    "CommAnalyzerBandwidth": "step TEXT, hccl_op_name TEXT, group_name TEXT, band_type TEXT, transit_size NUMERIC, "
    "transit_time NUMERIC, bandwidth NUMERIC, large_packet_ratio NUMERIC, package_size NUMERIC, count NUMERIC, "
    "total_duration NUMERIC",
    "CommAnalyzerMatrix": "step TEXT, hccl_op_name TEXT, group_name TEXT, src_rank TEXT, dst_rank TEXT, "
    "transport_type TEXT, transit_size NUMERIC, transit_time NUMERIC, bandwidth NUMERIC, op_name TEXT",
    "StepTraceTime": "step TEXT, computing NUMERIC, communication_not_overlapped NUMERIC, overlapped NUMERIC, "
    "communication NUMERIC, free NUMERIC, stage NUMERIC, bubble NUMERIC, "
    "communication_not_overlapped_and_exclude_receive NUMERIC, preparing NUMERIC",
}
# msprof's API levels (ENUM_API_TYPE)
_API_TYPES = {50001: "op", 20000: "acl", 15000: "node", 10000: "model", 5000: "runtime", 30000: "communication"}
# msprof's mstx event types (ENUM_MSTX_EVENT_TYPE): a mark, and a range opened by range_start and closed by range_end
_MSTX_EVENT_TYPES = {0: "marker", 1: "push/pop", 2: "start/end", 3: "marker_ex"}
_MSTX_MARK, _MSTX_RANGE = 0, 2


def profiler_db_name(rank_id):
    return f"ascend_pytorch_profiler_{rank_id}.db" if rank_id >= 0 else "ascend_pytorch_profiler.db"


def _headers(columns):
    """[(column, type), ...] of a "name TYPE, name TYPE" column list."""
    return [tuple(column.split(" ", 1)) for column in columns.split(", ")]


def _shapes(tensors):
    return ";".join(",".join(str(d) for d in t[0]) for t in tensors)


def _forward_backward_pairs(host_events):
    """(forward op, backward op) indices in host_events linked by autograd's sequence number: the outermost operator
    with the number on the forward thread, and the outermost backward operator naming that thread and number."""
    forward, backward = {}, {}
    for i, e in enumerate(host_events):
        if e["cat"] == "cpu_op" and "sequence" in e:
            if "fwd_thread" in e:
                backward.setdefault((e["fwd_thread"], e["sequence"]), i)
            else:
                forward.setdefault((e["thread"], e["sequence"]), i)
    return [(forward[key], b) for key, b in backward.items() if key in forward]


def _mstx_rows(session, strings):
    """MSTX_EVENTS: each mark and finished range of torch_npu.npu.mstx with its message and domain."""
    offset, rows = session["epoch_offset_ns"], []
    for r in session.get("mstx", []):
        mark = r["kind"] == "mark"
        start, end = (r["ns"], r["ns"]) if mark else (r["start_ns"], r["end_ns"])
        thread = r.get("thread", 0)
        rows.append(
            (
                start + offset,
                end + offset,
                _MSTX_MARK if mark else _MSTX_RANGE,
                0 if mark else r["id"],
                None,
                strings(r["message"]),
                thread,
                thread if mark else r.get("end_thread", thread),
                strings(r["domain"]),
                None,
            )
        )
    return rows


def _profiler_rows(session, rank_id, strings):
    offset, pid = session["epoch_offset_ns"], session["pid"]
    rows = {name: [] for name in _PROFILER_TABLES}
    # PYTORCH_API.connectionId is an id of CONNECTION_IDS, whose rows list the launches (TASK.connectionId) of the
    # kernels the operator issued
    launches = collections.defaultdict(list)
    parents = session.get("kernel_parents") or [None] * len(session["activities"])
    connection = 0
    for i, a in enumerate(session["activities"]):
        connection += 1
        if parents[i] is not None:
            launches[parents[i]].append(connection)
        start, end = a["start_ns"] + offset, a["end_ns"] + offset
        core = core_of(a)
        rows["CANN_API"].append((start, end, 20000, a["thread"], connection, strings("aclnn" + cann_type(a["name"]))))
        if a.get("memcpy"):  # a DMA task between host and device, not a compute kernel
            rows["TASK"].append(
                (start, end, a["device"], connection, i, pid, strings("MEMCPY_ASYNC"), 0, a["stream"], i, 4294967295)
            )
            continue
        rows["TASK"].append((start, end, a["device"], connection, i, pid, strings(core), 0, a["stream"], i, 4294967295))
        state = "dynamic" if session.get("jit_compile") else "static"
        rows["COMPUTE_TASK_INFO"].append(
            (
                strings(op_type(a["name"])),
                i,
                1,
                0,
                strings(core),
                strings(cann_type(a["name"])),
                strings(";".join(str(t[2]) for t in a["inputs"])),
                strings(";".join(t[1] for t in a["inputs"])),
                strings(_shapes(a["inputs"])),
                strings(";".join(str(t[2]) for t in a["outputs"])),
                strings(";".join(t[1] for t in a["outputs"])),
                strings(_shapes(a["outputs"])),
                strings(""),
                strings(state),
                strings("NO"),
            )
        )
    for op_id, c in enumerate(session.get("collectives", [])):
        connection += 1
        start, end = c["start_ns"] + offset, c["end_ns"] + offset
        rows["CANN_API"].append((start, end, 30000, 0, connection, strings(c["name"])))
        rows["COMMUNICATION_OP"].append(
            (
                strings(c["name"]),
                start,
                end,
                connection,
                strings(group_hash(c["group"])),
                op_id,
                0,
                0,
                strings(c["dtype"]),
                strings("RING"),
                c["count"],
                strings("hcom_" + c["name"].split("_")[1]),
            )
        )
    if cann_api.recorded(session):  # the runtime's synchronisations and event / stream calls
        for api, start_ns, end_ns, thread, _device in session.get("runtime_api", []):
            connection += 1
            rows["CANN_API"].append((start_ns + offset, end_ns + offset, 20000, thread, connection, strings(api)))
    for forward, backward in _forward_backward_pairs(session["host_events"]):  # a link both ends share
        connection += 1
        launches[forward].append(connection)
        launches[backward].append(connection)
    connections = ConnectionIdManager()
    group_of = {host: connections.get_id_from_connection_ids(launches[host]) for host in sorted(launches)}
    rows["CONNECTION_IDS"] = [(g, c) for g, ids in connections.get_all_connection_ids().items() for c in ids]
    callchains = CallChainIdManager()
    rows["MSTX_EVENTS"] = _mstx_rows(session, strings)
    rows["ENUM_MSTX_EVENT_TYPE"] = list(_MSTX_EVENT_TYPES.items())
    for index, e in enumerate(session["host_events"]):
        if e["cat"] != "cpu_op":
            continue
        rows["PYTORCH_API"].append(
            (
                e["start_ns"] + offset,
                e["end_ns"] + offset,
                e["thread"],
                group_of.get(index),
                strings(e["name"]),
                None,
                None,
                strings(";".join(str(d) for d in e.get("dtypes") or [])),
                strings(";".join(str(s) for s in e.get("shapes") or [])),
                callchains.get_callchain_id_from_callstack(CallChainIdManager.SEPARATOR.join(e.get("stack") or [])),
                50001,
            )
        )
    rows["PYTORCH_CALLCHAINS"] = [
        (chain, strings(frame), depth)
        for chain, frames in callchains.get_all_callchain_id().items()
        for frame, depth in frames
    ]
    devices = sorted({a["device"] for a in session["activities"]}) or [0]
    rows["RANK_DEVICE_MAP"] = [(rank_id, d) for d in devices]
    from torch_npu import _C

    rows["NPU_INFO"] = [(d, _C._soc_profile()["name"]) for d in devices]
    rows["STEP_TIME"] = [(n, s + offset, e + offset) for n, s, e in session["steps"] if session["has_steps"]]
    starts = [a["start_ns"] for a in session["activities"]] + [e["start_ns"] for e in session["host_events"]]
    ends = [a["end_ns"] for a in session["activities"]] + [e["end_ns"] for e in session["host_events"]]
    if starts:
        rows["SESSION_TIME_INFO"] = [(min(starts) + offset, max(ends) + offset)]
    rows["ENUM_API_TYPE"] = list(_API_TYPES.items())
    meta = [("SCHEMA_VERSION", "1.0.0")]
    if session.get("parallel_group_info"):
        meta.append(("parallel_group_info", json.dumps(session["parallel_group_info"])))
    rows["META_DATA"] = meta
    return rows


def _analysis_rows(session, step_rows):
    rows = {name: [] for name in _ANALYSIS_TABLES}
    tables = communication_tables(session)
    if tables is not None:
        communication, matrix = tables
        for step, kinds in communication.items():
            for ops in kinds.values():
                for key, info in ops.items():
                    if key.startswith("Total"):
                        continue
                    name, group = key.split("@")
                    t = info["Communication Time Info"]
                    rows["CommAnalyzerTime"].append(
                        (
                            step,
                            name,
                            group,
                            t["Start Timestamp(us)"],
                            t["Elapse Time(ms)"],
                            t["Transit Time(ms)"],
                            t["Wait Time(ms)"],
                            t["Synchronization Time(ms)"],
                            t["Idle Time(ms)"],
                            t["Synchronization Time Ratio"],
                            t["Wait Time Ratio"],
                        )
                    )
                    for band, b in info["Communication Bandwidth Info"].items():
                        for package, (count, duration) in b["Size Distribution"].items() or [("0", (0, 0.0))]:
                            rows["CommAnalyzerBandwidth"].append(
                                (
                                    step,
                                    name,
                                    group,
                                    band,
                                    b["Transit Size(MB)"],
                                    b["Transit Time(ms)"],
                                    b["Bandwidth(GB/s)"],
                                    b["Large Packet Ratio"],
                                    float(package),
                                    count,
                                    duration,
                                )
                            )
        for step, kinds in matrix.items():
            for ops in kinds.values():
                for key, link_map in ops.items():
                    name, group = key.split("@")
                    for link, v in link_map.items():
                        src, dst = link.split("-")
                        rows["CommAnalyzerMatrix"].append(
                            (
                                step,
                                name,
                                group,
                                src,
                                dst,
                                v["Transport Type"],
                                v["Transit Size(MB)"],
                                v["Transit Time(ms)"],
                                v["Bandwidth(GB/s)"],
                                v["Op Name"],
                            )
                        )
    for row in step_rows:
        rows["StepTraceTime"].append((str(row[1]) if row[1] != "" else None, *row[2:]))
    return rows


def _write(database, path, tables, rows):
    """Write rows (table -> list of row tuples) into a fresh database file at path through `database` (TorchDb or
    AnalysisDb, torch_npu's per-process databases)."""
    if os.path.exists(path):
        os.remove(path)
    database.init(path)
    if not database.create_connect_db():
        raise RuntimeError(f"Failed to create the profiler db file {path}")
    try:
        for name, columns in tables.items():
            database.create_table_with_headers(name, _headers(columns))
            database.insert_data_into_table(name, rows.get(name, []))
    finally:
        database.close()
    return path


def write_databases(out, session, rank_id, step_rows):
    """Writes the profiler database and analysis.db into `out` (ASCEND_PROFILER_OUTPUT); returns their paths."""
    # imported here: sqlite3 and the DB manager cost import time to every program, and only DB exports use them
    from torch_npu.profiler.analysis.prof_common_func._db_manager import AnalysisDb, TorchDb

    # A card's database always has its kernels' shapes, dtypes and formats; vnpu records them with record_shapes
    # only, so an empty text stays a text: the tools' groupings by those columns keep the kernels.
    strings = Str2IdManager(keep_empty=True)
    rows = _profiler_rows(session, rank_id, strings.get_id_from_str)
    rows["STRING_IDS"] = [(i, v) for v, i in strings.get_all_string_dict().items()]
    profiler_db = _write(TorchDb(), os.path.join(out, profiler_db_name(rank_id)), _PROFILER_TABLES, rows)
    analysis_rows = _analysis_rows(session, step_rows)
    analysis_db = _write(AnalysisDb(), os.path.join(out, "analysis.db"), _ANALYSIS_TABLES, analysis_rows)
    return profiler_db, analysis_db
