"""communication.json and communication_matrix.json of ASCEND_PROFILER_OUTPUT, from the collectives the
hccl backend recorded (profiler/CollectiveRecorder.h), in the layout CANN's analysis writes and
msprof-analyze reads: per step, "collective" and "p2p" operators named `<hcom op>@<group hash>`.

What is measured and what is modelled:
- Elapse Time is measured: from the collective's issue to its completion on this rank.
- The bytes on each link are what the collective moves with HCCL's ring algorithms on the group's
  local ranks: allreduce sends 2(n-1)/n of the tensor to the next rank, allgather and reduce_scatter
  (n-1) chunks, broadcast and scatter go out from the root, reduce and gather into it, all_to_all
  sends each peer its share, send its tensor. Each rank reports its outgoing links (and a LOCAL self
  link), so a 2-rank all_reduce of N bytes shows N bytes on 0-1 and on 1-0.
- Transit Time is the link time of those bytes at the HCCS bandwidth of an Atlas A2 (LINK_GBPS, a
  model: vnpu's collectives travel through host memory); Wait Time is the rest of the elapsed time
  (waiting for the other ranks), and counts as Synchronization Time.
"""

import collections

from torch_npu.profiler.overlap import session_windows

__all__ = ["LINK_GBPS", "group_hash", "links", "communication_tables", "parallel_group_info"]

LINK_GBPS = 56.0
_MB = 1024 * 1024
_TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")


def group_hash(name):
    """The group id CANN appends to operator names: msprof-analyze's double hash of the group name."""
    hashes = [0, 0]
    for ch in name:
        hashes[0] = (hashes[0] * 29 + ord(ch)) & 0xFFFFFFFF
        hashes[1] = (hashes[1] * 131 + ord(ch)) & 0xFFFFFFFF
    return str((hashes[0] << 32) | hashes[1])


def links(c):
    """{(src, dst): bytes} this rank sends in collective record `c` (local ranks of its group)."""
    rank, n, nbytes, peer, kind = c["rank"], c["size"], c["bytes"], c["peer"], c["kind"]
    out = {}
    nxt = (rank + 1) % n
    if n > 1 and kind == "allreduce":
        out[(rank, nxt)] = 2 * (n - 1) * nbytes // n
    elif n > 1 and kind in ("allgather", "reduce_scatter"):
        out[(rank, nxt)] = (n - 1) * nbytes
    elif kind in ("broadcast", "scatter") and rank == peer:
        out.update({(rank, j): nbytes for j in range(n) if j != rank})
    elif kind in ("reduce", "gather") and rank != peer and peer >= 0:
        out[(rank, peer)] = nbytes
    elif kind == "all_to_all":
        out.update({(rank, j): nbytes // n for j in range(n) if j != rank})
    elif kind == "send" and peer >= 0:
        out[(rank, peer)] = nbytes
    return out


def _bandwidth(size_mb, time_ms):
    return round(size_mb / time_ms, 4) if time_ms > 0 else 0.0


def _op_info(c, offset_ns):
    elapse = (c["end_ns"] - c["start_ns"]) / 1e6
    moved = sum(links(c).values())
    transit = min(elapse, moved / (LINK_GBPS * 1e9) * 1e3)
    wait = elapse - transit
    size_mb = moved / _MB
    bandwidth = {t: _empty_transport() for t in _TRANSPORTS}
    bandwidth["HCCS"] = {
        "Transit Size(MB)": size_mb,
        "Transit Time(ms)": transit,
        "Bandwidth(GB/s)": _bandwidth(size_mb, transit),
        "Large Packet Ratio": 0.0,
        "Size Distribution": {str(round(size_mb, 6)): [1, transit]} if moved else {},
    }
    return {
        "Communication Time Info": {
            "Start Timestamp(us)": round((c["start_ns"] + offset_ns) / 1000.0, 3),
            "Elapse Time(ms)": elapse,
            "Transit Time(ms)": transit,
            "Wait Time(ms)": wait,
            "Synchronization Time(ms)": wait,
            "Idle Time(ms)": 0.0,
            "Wait Time Ratio": round(wait / (wait + transit), 4) if wait + transit > 0 else 0.0,
            "Synchronization Time Ratio": round(wait / (wait + transit), 4) if wait + transit > 0 else 0.0,
        },
        "Communication Bandwidth Info": bandwidth,
    }


def _empty_transport():
    return {
        "Transit Size(MB)": 0.0,
        "Transit Time(ms)": 0.0,
        "Bandwidth(GB/s)": 0.0,
        "Large Packet Ratio": 0.0,
        "Size Distribution": {},
    }


def _total(infos):
    time_keys = ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)")
    times = {k: sum(i["Communication Time Info"][k] for i in infos) for k in time_keys}
    wait, transit = times["Wait Time(ms)"], times["Transit Time(ms)"]
    times["Start Timestamp(us)"] = min((i["Communication Time Info"]["Start Timestamp(us)"] for i in infos), default=0)
    times["Wait Time Ratio"] = times["Synchronization Time Ratio"] = (
        round(wait / (wait + transit), 4) if wait + transit > 0 else 0.0
    )
    bandwidth = {}
    for t in _TRANSPORTS:
        size = sum(i["Communication Bandwidth Info"][t]["Transit Size(MB)"] for i in infos)
        time_ms = sum(i["Communication Bandwidth Info"][t]["Transit Time(ms)"] for i in infos)
        entry = _empty_transport()
        entry.update(
            {"Transit Size(MB)": size, "Transit Time(ms)": time_ms, "Bandwidth(GB/s)": _bandwidth(size, time_ms)}
        )
        bandwidth[t] = entry
    return {"Communication Time Info": times, "Communication Bandwidth Info": bandwidth}


def _step_of(c, windows):
    for number, start, end in windows:
        if start <= c["start_ns"] < end:
            return f"step{number}"
    return "step"


def communication_tables(session):
    """(communication.json, communication_matrix.json) contents; None when nothing was recorded."""
    records = session.get("collectives", [])
    if not records:
        return None
    windows = session_windows(session) if session["has_steps"] else []
    offset = session["epoch_offset_ns"]
    comm = collections.defaultdict(lambda: {"collective": {}, "p2p": {}})
    matrix = collections.defaultdict(lambda: {"collective": {}, "p2p": {}})
    for c in records:
        step = _step_of(c, windows)
        kind = "p2p" if c["kind"] in ("send", "recv") else "collective"
        key = f"{c['name']}@{group_hash(c['group'])}"
        comm[step][kind][key] = _op_info(c, offset)
        info = comm[step][kind][key]
        transit = info["Communication Time Info"]["Transit Time(ms)"]
        moved = sum(links(c).values()) or 1
        entry = {f"{c['rank']}-{c['rank']}": _link("LOCAL", 0, 0.0, c["name"])}
        for (src, dst), nbytes in links(c).items():
            entry[f"{src}-{dst}"] = _link("HCCS", nbytes, transit * nbytes / moved, c["name"])
        matrix[step][kind][key] = entry
    for step in comm.values():
        for ops in step.values():
            if ops:
                ops["Total Op Info"] = _total(list(ops.values()))
    return dict(comm), dict(matrix)


def _link(transport, nbytes, time_ms, op_name):
    size_mb = nbytes / _MB
    return {
        "Transport Type": transport,
        "Transit Size(MB)": size_mb,
        "Transit Time(ms)": time_ms,
        "Bandwidth(GB/s)": _bandwidth(size_mb, time_ms),
        "Op Name": op_name,
    }


def parallel_group_info():
    """profiler_metadata.json's parallel_group_info: each hccl process group this rank is in, keyed by its
    communicator name, with its name, this rank's rank in it and its global ranks."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return {}
    world = dist.distributed_c10d._world
    info = {}
    for pg in list(world.pg_map):
        try:
            backend = pg._get_backend(torch.device("npu"))
        except RuntimeError:
            continue
        if not hasattr(backend, "get_hccl_comm_name"):
            continue
        group_rank = dist.get_rank(pg)
        info[backend.get_hccl_comm_name(group_rank)] = {
            "group_name": world.pg_names.get(pg, ""),
            "group_rank": group_rank,
            "global_ranks": dist.get_process_group_ranks(pg),
        }
    return info
