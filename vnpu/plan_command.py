"""``vnpu plan [--soc A,B] [--steps N] [--report FILE.md|.json] -- python train.py ...``: will this job fit
on the card, and roughly how long will it take?

The program runs unchanged in planning mode (VNPU_PLAN=1, see torch_npu/csrc/aten/PlanMode.h): npu memory
comes from the real caching allocator but is never backed by host memory, and operators compute shapes
only, so models far larger than this machine plan in seconds. torchrun / multi-process programs work:
every process writes its own record (torch_npu/npu/_plan.py), and collectives move nothing but are counted.

The report, per process and device: peak allocated and reserved memory, the operator and program line
at the allocated peak, fragmentation (reserved memory not allocated at the reserved peak), retries and
OOMs; for each SoC of --soc, whether the largest reserved peak fits its HBM and an estimated time.

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
from rich.table import Table

from vnpu.report_files import write_report

_GIB = 2**30


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
    parser.add_argument("--report", help="also write the report to FILE.md or FILE.json")
    args = parser.parse_args(argv[:split])
    args.command = argv[split + 1 :]
    if not args.command:
        parser.error("no program after --")
    socs = _known_socs()
    args.socs = [s.strip() for s in args.soc.split(",") if s.strip()]
    unknown = [s for s in args.socs if s not in socs]
    if unknown:
        parser.error(f"unknown SoC {', '.join(unknown)}; known: {', '.join(sorted(socs))}")
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


def _verdict_text(v):
    gib = abs(v["margin_bytes"]) / _GIB
    return f"fits ({gib:.2f} GiB free)" if v["fits"] else f"does not fit by {gib:.2f} GiB"


def _fragmentation(d):
    reserved = d["reserved_bytes.all.peak"]
    return 0.0 if reserved == 0 else 1 - d["allocated_bytes.all.peak"] / reserved


def markdown(report):
    lines = [f"# vnpu plan: `{' '.join(report['command'])}`", "", f"Modelled SoC: {report['modelled_soc']}", ""]
    lines += [
        "| rank | device | peak allocated GiB | peak reserved GiB | fragmentation | retries | OOMs | peak at |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in report["devices"]:
        where = f"{d['peak_operator']} {d['peak_site']}".strip()
        lines.append(
            f"| {d['rank']} | npu:{d['device']} | {d['allocated_bytes.all.peak'] / _GIB:.2f} | "
            f"{d['reserved_bytes.all.peak'] / _GIB:.2f} | {_fragmentation(d):.1%} | {d['num_alloc_retries']} | "
            f"{d['num_ooms']} | {where} |"
        )
    lines += [
        "",
        "| SoC | HBM GiB | verdict | est. step s | compute s | communication s |",
        "|---|---|---|---|---|---|",
    ]
    for v in report["verdicts"]:
        lines.append(
            f"| {v['soc']} | {v['hbm_bytes'] / _GIB:.0f} | {_verdict_text(v)} | {v['step_seconds']:.4f} | "
            f"{v['compute_seconds']:.4f} | {v['communication_seconds']:.4f} |"
        )
    lines += ["", "Times are roofline estimates (see `vnpu plan --help`), not measurements."]
    return "\n".join(lines) + "\n"


def show(report, console):
    table = Table(title=f"Memory (modelled SoC {report['modelled_soc']})")
    for column in ("rank", "device", "peak allocated", "peak reserved", "fragmentation", "retries", "OOMs", "peak at"):
        table.add_column(column)
    for d in report["devices"]:
        table.add_row(
            str(d["rank"]),
            f"npu:{d['device']}",
            f"{d['allocated_bytes.all.peak'] / _GIB:.2f} GiB",
            f"{d['reserved_bytes.all.peak'] / _GIB:.2f} GiB",
            f"{_fragmentation(d):.1%}",
            str(d["num_alloc_retries"]),
            str(d["num_ooms"]),
            f"{d['peak_operator']} {d['peak_site']}".strip(),
        )
    console.print(table)
    verdicts = Table(title="Verdict per SoC (times are roofline estimates)")
    for column in ("SoC", "HBM", "verdict", "est. step", "compute", "communication"):
        verdicts.add_column(column)
    for v in report["verdicts"]:
        verdicts.add_row(
            v["soc"],
            f"{v['hbm_bytes'] / _GIB:.0f} GiB",
            _verdict_text(v),
            f"{v['step_seconds']:.4f} s",
            f"{v['compute_seconds']:.4f} s",
            f"{v['communication_seconds']:.4f} s",
        )
    console.print(verdicts)


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
        write_report(args.report, report, markdown)
    return status
