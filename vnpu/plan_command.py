"""``vnpu plan [--soc A,B] [--steps N] [--report FILE.md|.json] -- python train.py ...``: will this job fit
on the card, and roughly how long will it take?

The program runs unchanged in planning mode (VNPU_PLAN=1, see torch_npu/csrc/plan/PlanMode.h): npu memory
comes from the real caching allocator but is never backed by host memory, and operators compute shapes
only, so models far larger than this machine plan in seconds. torchrun / multi-process programs work:
every process writes its own record (torch_npu/npu/_plan.py), and collectives move nothing but are counted.

The report (vnpu/plan_report.py), per process and device: peak allocated and reserved memory, where the
allocated peak happened (operator, module, program line), fragmentation (reserved memory not allocated at
the reserved peak), retries and OOMs, the peaks of every step (a step ends when an optimizer steps) and
the biggest tensors alive at the peak (named when they are parameters, gradients, buffers or optimizer
state); for each SoC of --soc, whether the largest reserved peak fits its HBM and an estimated time.

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
    socs = _known_socs()
    args.socs = [s.strip() for s in args.soc.split(",") if s.strip()]
    unknown = [s for s in args.socs if s not in socs]
    if unknown:
        parser.error(f"unknown SoC {', '.join(unknown)}; known: {', '.join(sorted(socs))}")
    if args.report and suffix_problem(args.report):
        parser.error(suffix_problem(args.report))
    if args.steps < 1:
        parser.error("--steps must be at least 1")
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


def build(records, args):
    socs = _known_socs()
    devices = [
        {"rank": r["rank"], "pid": r["pid"], **d}
        for r in sorted(records, key=lambda r: r["rank"])
        for d in r["devices"]
    ]
    need = max((d["reserved_bytes.all.peak"] for d in devices), default=0)
    verdicts = []
    for name in args.socs:
        soc = socs[name]
        compute, comm = estimate(records, soc, args.link_gbps)
        free = soc["total_memory"] - need
        verdicts.append(
            {
                "soc": name,
                "hbm_bytes": soc["total_memory"],
                "fits": free >= 0,
                "margin_bytes": free,
                "step_seconds": (compute + comm) / args.steps,
                "compute_seconds": compute / args.steps,
                "communication_seconds": comm / args.steps,
            }
        )
    return {
        "command": args.command,
        "modelled_soc": records[0]["soc"]["name"] if records else None,
        "devices": devices,
        "verdicts": verdicts,
    }


def run(argv):
    args = parse(argv)
    socs = _known_socs()
    largest = max(args.socs, key=lambda s: socs[s]["total_memory"])
    with tempfile.TemporaryDirectory(prefix="vnpu_plan_") as directory:
        env = dict(os.environ, VNPU_PLAN="1", VNPU_PLAN_REPORT=directory)
        env.setdefault("VNPU_SOC", largest)  # the allocator models the largest card judged
        status = subprocess.run(args.command, env=env).returncode
        records = []
        for path in sorted(glob.glob(os.path.join(directory, "plan_*.json"))):
            with open(path) as f:
                records.append(json.load(f))
    if not records:
        print(f"vnpu plan: the program wrote no plan (exit status {status}); did it import torch?", file=sys.stderr)
        return status or 1
    report = build(records, args)
    show(report, Console(width=None if sys.stdout.isatty() else 140))
    if args.report:
        write_report(args.report, report, markdown, title=f"vnpu plan: {' '.join(args.command)}")
    return status
