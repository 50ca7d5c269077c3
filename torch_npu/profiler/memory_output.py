"""profile_memory files: memory_record.csv (device totals after every allocator event),
operator_memory.csv (each block: the operator that allocated it, when it was freed, totals at both ends)
and npu_module_mem.csv (reserved device memory over time), with torch_npu's exact headers.

Events come from vnpu's caching allocator (runtime/ProfilerMemory.h); sizes are the allocator's block
sizes, as torch_npu reports them. Component is PTA (PyTorch adapter) for all of them: vnpu has no
GE/CANN workspaces. A block is attributed to the innermost host operator running on the allocating
thread (the npu operator when CPU activity was not recorded).
"""

from torch_npu.profiler.timeline import owning_intervals

__all__ = ["MEMORY_RECORD_HEADER", "OPERATOR_MEMORY_HEADER", "MODULE_MEM_HEADER", "memory_tables"]

MEMORY_RECORD_HEADER = [
    "Component",
    "Timestamp(us)",
    "Total Allocated(MB)",
    "Total Reserved(MB)",
    "Total Active(MB)",
    "Stream Ptr",
    "Device Type",
]
OPERATOR_MEMORY_HEADER = [
    "Name",
    "Size(KB)",
    "Allocation Time(us)",
    "Release Time(us)",
    "Active Release Time(us)",
    "Duration(us)",
    "Active Duration(us)",
    "Allocation Total Allocated(MB)",
    "Allocation Total Reserved(MB)",
    "Allocation Total Active(MB)",
    "Release Total Allocated(MB)",
    "Release Total Reserved(MB)",
    "Release Total Active(MB)",
    "Stream Ptr",
    "Device Type",
]
MODULE_MEM_HEADER = ["Device_id", "Component", "Timestamp(us)", "Total Reserved(MB)", "Device"]


def _mb(n):
    return round(n / 2**20, 4)


def _owner_names(session):
    """The operator each memory event belongs to (timeline.owning_intervals), else PTA."""
    host = [e for e in session["host_events"] if e["cat"] == "cpu_op"] or session["activities"]
    owners = owning_intervals(host, [(m[8], m[7], m[9] if len(m) > 9 else 0) for m in session["memory"]])
    return [host[k]["name"] if k is not None else "PTA" for k in owners]


def memory_tables(session):
    """(memory_record rows, operator_memory rows, npu_module_mem rows)."""
    offset = session["epoch_offset_ns"]

    def us(ns):
        return round((ns + offset) / 1000.0, 3)

    records, modules, blocks = [], [], []
    open_blocks = {}
    last_reserved = {}
    for m, name in zip(session["memory"], _owner_names(session)):
        ptr, size, allocated, reserved, active, device, stream, time_ns = m[:8]
        records.append(["PTA", us(time_ns), _mb(allocated), _mb(reserved), _mb(active), stream, f"NPU:{device}"])
        if last_reserved.get(device) != reserved:
            last_reserved[device] = reserved
            modules.append([device, "PTA", us(time_ns), _mb(reserved), f"NPU:{device}"])
        if size > 0:
            row = [
                name,
                round(size / 1024, 4),
                us(time_ns),
                "",
                "",
                "",
                "",
                _mb(allocated),
                _mb(reserved),
                _mb(active),
                "",
                "",
                "",
                stream,
                f"NPU:{device}",
            ]
            open_blocks[(device, ptr)] = (row, time_ns)
            blocks.append(row)
        elif size < 0 and (device, ptr) in open_blocks:
            row, start = open_blocks.pop((device, ptr))
            duration = round((time_ns - start) / 1000.0, 3)
            row[3:7] = [us(time_ns), us(time_ns), duration, duration]
            row[10:13] = [_mb(allocated), _mb(reserved), _mb(active)]
    return records, blocks, modules
