"""``vnpu plan [--soc A,B] [--steps N] [--report FILE.md|.json|.html] -- python train.py ...``: will this job fit
on the card, and roughly how long will it take?

The program runs unchanged in planning mode (VNPU_PLAN=1, see torch_npu/csrc/plan/PlanMode.h): npu memory
comes from the real caching allocator but is never backed by host memory, and operators compute shapes
only, so models far larger than this machine plan in seconds. torchrun / multi-process programs work:
every process writes its own record (torch_npu/npu/_plan.py), and collectives move nothing but are counted.

The report (vnpu/plan_report.py), per process and device: peak allocated and reserved memory, where the
allocated peak happened (operator, module, program line), fragmentation (reserved memory not allocated at
the reserved peak), retries and OOMs, the peaks of every step (a step ends when an optimizer steps) and
the biggest tensors alive at the peak (named when they are parameters, gradients, buffers or optimizer
state); for each SoC of --soc, whether the job fits its HBM (with the margin, or where it runs out) and an
estimated time.

The program runs on the largest SoC of --soc with VNPU_PLAN_OVER_CAPACITY=1: a request the card cannot
hold, even after the allocator released its cache, gets memory anyway and is recorded where it happened,
so the run goes on and tells how much more the job needs. A smaller SoC is judged from the same run when
the job's reserved peak fits it; otherwise the program is planned again on that SoC (quietly), since
near the capacity the allocator releases its cache and may fit after all.

The time is an ESTIMATE from the profiler's roofline model (torch_npu/profiler/roofline.py: each operator
max(FLOPs / peak FLOP/s, bytes / HBM bandwidth) + launch, no overlap, no fusion) plus ring collectives at
--link-gbps (default 56 GB/s, one HCCS link: allreduce moves 2(n-1)/n of its bytes, all_gather and
reduce_scatter (n-1)/n of the whole tensor). It covers everything the program ran (model construction
included), divided by --steps.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

from rich.console import Console

from vnpu.plan_report import markdown, show
from vnpu.report_files import suffix_problem, write_report


def _known_socs():
    from torch_npu import _C

    return {s["name"]: s for s in _C._known_socs()}


def parse(argv):
    if "--" not in argv:
        raise SystemExit("vnpu plan: give the program after --, e.g. vnpu plan --soc Ascend910B4 -- python train.py")
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="vnpu plan", description="Plan a job's memory and step time.")
    parser.add_argument("--soc", default="Ascend910B1", help="comma-separated SoC profiles to judge the job on")
    parser.add_argument("--steps", type=int, default=1, help="training steps the program runs (for time per step)")
    parser.add_argument("--link-gbps", type=float, default=56.0, help="collective link bandwidth, GB/s")
    parser.add_argument("--report", help="also write the report to FILE.md, FILE.json or FILE.html")
    args = parser.parse_args(argv[:split])
    args.command = argv[split + 1 :]
    if not args.command:
        parser.error("no program after --")
    if args.report and suffix_problem(args.report):
        parser.error(suffix_problem(args.report))
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    socs = _known_socs()  # last: the list comes from torch_npu, which imports torch
    args.socs = [s.strip() for s in args.soc.split(",") if s.strip()]
    unknown = [s for s in args.socs if s not in socs]
    if unknown:
        parser.error(f"unknown SoC {', '.join(unknown)}; known: {', '.join(sorted(socs))}")
    return args


def _collective_bytes(record):
    n, size = record["size"], record["bytes"]
    kind = record["kind"]
    if n < 2:
        return 0.0
    if kind in ("allreduce", "allreduce_coalesced"):
        return 2 * (n - 1) / n * size
    if kind in ("allgather", "allgather_into_tensor", "_allgather_base"):
        return (n - 1) * size
    if kind in ("reduce_scatter", "_reduce_scatter_base", "alltoall", "alltoall_base", "all_to_all_single"):
        return (n - 1) / n * size
    if kind == "barrier":
        return 0.0
    return float(size)  # broadcast, reduce, gather, scatter, send, recv


def estimate(records, soc, link_gbps):
    """(compute seconds, communication seconds) of the slowest process on `soc`."""
    from torch_npu.profiler.roofline import estimate_us

    slowest = (0.0, 0.0)
    for r in records:
        compute = sum(
            (estimate_us(op, ins, in_dt, outs, out_dt, soc["fp16_tflops"], soc["hbm_gbps"]) or 0.0) * calls
            for op, ins, in_dt, outs, out_dt, calls in r["operators"]
        )
        comm = sum(_collective_bytes(c) for c in r["collectives"]) / (link_gbps * 1e9)
        if compute / 1e6 + comm > sum(slowest):
            slowest = (compute / 1e6, comm)
    return slowest


def _devices(records):
    return [
        {"rank": r["rank"], "pid": r["pid"], **d}
        for r in sorted(records, key=lambda r: r["rank"])
        for d in r["devices"]
    ]


def _memory_verdict(devices, hbm):
    """(fits, margin bytes, where the first device ran out) of one run on a card of `hbm` bytes."""
    need = max((d["reserved_bytes.all.peak"] for d in devices), default=0)
    over = [d for d in devices if d.get("over_capacity")]
    where = ""
    if over:
        first = over[0]["over_capacity"]
        where = " ".join(
            p
            for p in (
                first["operator"],
                f"in {first['module']}" if first["module"] else "",
                f"at {first['site']}" if first["site"] else "",
            )
            if p
        )
    return not over and need <= hbm, hbm - need, where


def build(records, args, rerun=None, status=0):
    """The report. A SoC smaller than the one the program ran on is judged by `rerun(soc)` (the program's
    records on that card) when the run's reserved memory went beyond it: the allocator may then have
    released its cache and fit after all. A program that failed (exit `status`) gets no verdict: its
    memory is only what it reached before it stopped."""
    socs = _known_socs()
    devices = _devices(records)
    need = max((d["reserved_bytes.all.peak"] for d in devices), default=0)
    modelled = records[0]["soc"]["total_memory"] if records else 0
    verdicts = []
    for name in args.socs:
        soc = socs[name]
        hbm = soc["total_memory"]
        if status != 0:
            fits, margin, where = None, hbm - need, ""
        elif hbm >= modelled or need <= hbm or rerun is None:
            fits, margin, where = _memory_verdict(devices, hbm)
        else:
            fits, margin, where = _memory_verdict(_devices(rerun(name)), hbm)
        compute, comm = estimate(records, soc, args.link_gbps)
        verdicts.append(
            {
                "soc": name,
                "hbm_bytes": hbm,
                "fits": fits,
                "margin_bytes": margin,
                "runs_out_at": where,
                "step_seconds": (compute + comm) / args.steps,
                "compute_seconds": compute / args.steps,
                "communication_seconds": comm / args.steps,
            }
        )
    return {
        "command": args.command,
        "exit_status": status,
        "modelled_soc": records[0]["soc"]["name"] if records else None,
        "devices": devices,
        "verdicts": verdicts,
    }


def _plan_once(command, soc, quiet):
    """Runs the program planned on `soc`; (exit status, the records its processes wrote)."""
    with tempfile.TemporaryDirectory(prefix="vnpu_plan_") as directory:
        env = dict(os.environ, VNPU_PLAN="1", VNPU_PLAN_REPORT=directory, VNPU_PLAN_OVER_CAPACITY="1", VNPU_SOC=soc)
        env.pop("VNPU_DEVICE_MEMORY", None)  # the card is the SoC's
        out = subprocess.DEVNULL if quiet else None
        status = subprocess.run(command, env=env, stdout=out, stderr=out).returncode
        records = []
        for path in sorted(glob.glob(os.path.join(directory, "plan_*.json"))):
            with open(path) as f:
                records.append(json.load(f))
    return status, records


def run(argv):
    args = parse(argv)
    socs = _known_socs()
    largest = max(args.socs, key=lambda s: socs[s]["total_memory"])
    status, records = _plan_once(args.command, largest, quiet=False)
    if not records:
        print(f"vnpu plan: the program wrote no plan (exit status {status}); did it import torch?", file=sys.stderr)
        return status or 1
    report = build(records, args, rerun=lambda soc: _plan_once(args.command, soc, quiet=True)[1], status=status)
    show(report, Console(width=None if sys.stdout.isatty() else 140))
    if args.report:
        write_report(args.report, report, markdown, title=f"vnpu plan: {' '.join(args.command)}")
    return status
