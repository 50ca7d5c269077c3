"""`vnpu run SCRIPT [args]`: run an unmodified CUDA (or NPU) PyTorch script on the virtual NPU with
transfer_to_npu active, then print an Ascend readiness report; `--report FILE.md|.json|.html` also writes it.
The exit status is the script's."""

import collections
import os
import runpy
import sys
import traceback
import warnings

from rich.console import Console
from rich.table import Table

from vnpu.report_files import suffix_problem, write_report


class _Recorder:
    """Operators executed (count, host time; summed in C++, see aten/OperatorTotals.h) and the warnings raised."""

    def __init__(self):
        self.ops = {}
        self.warnings = collections.Counter()

    def showwarning(self, original):
        def show(message, category, filename, lineno, file=None, line=None):
            self.warnings[f"{category.__name__}: {str(message).splitlines()[0]}"] += 1
            original(message, category, filename, lineno, file, line)

        return show


def _run_script(path, argv):
    """The script's exit status (SystemExit code, 1 on an uncaught exception)."""
    sys.argv = [path] + list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:  # noqa: BLE001 - the script's own failure: shown as Python would, then reported
        traceback.print_exc()
        return 1
    return 0


def _report(script, status, recorder):
    import torch

    import torch_npu
    from torch_npu import _op_support
    from torch_npu.contrib import transfer_to_npu

    devices = []
    for i in range(torch.npu.device_count()):
        peak = torch.npu.max_memory_allocated(i)
        if peak or (torch.npu.is_initialized() and i == torch.npu.current_device()):
            props = torch.npu.get_device_properties(i)
            devices.append(
                {
                    "device": f"npu:{i}",
                    "soc": props.name,
                    "peak_allocated_bytes": peak,
                    "peak_reserved_bytes": torch.npu.max_memory_reserved(i),
                    "capacity_bytes": props.total_memory,
                    "peak_fraction": round(torch.npu.max_memory_reserved(i) / props.total_memory, 6),
                }
            )
    ops = sorted(
        ({"operator": k, "calls": v[0], "host_ms": round(v[1] / 1e6, 3)} for k, v in recorder.ops.items()),
        key=lambda r: -r["host_ms"],
    )
    ledger = _op_support.ledger()
    fallback = None
    if ledger is not None:
        fallback = [
            {
                "operator": op,
                "calls": n,
                "sites": [{"line": s, "calls": c} for s, c in sorted(ledger.sites.get(op, {}).items())],
            }
            for op, n in sorted(ledger.calls.items(), key=lambda kv: -kv[1])
        ]
    return {
        "script": script,
        "exit_status": status,
        "vnpu": torch_npu.__version__,
        "torch": torch.__version__,
        "torch_npu_profile": ledger.profile["torch_npu"] if ledger is not None else None,
        "devices": devices,
        "operators": ops,
        "cpu_fallback": fallback,
        "patched_cuda_calls": dict(sorted(transfer_to_npu.patched_calls().items(), key=lambda kv: -kv[1])),
        "warnings": [{"warning": w, "count": n} for w, n in recorder.warnings.most_common()],
    }


def _gib(n):
    return f"{n / 2**30:.3f} GiB"


def _markdown(report, top=20):
    from vnpu.ops_command import NO_PROFILE

    lines = [
        f"# Ascend readiness report: {report['script']}",
        "",
        f"Exit status {report['exit_status']}; vnpu {report['vnpu']}, torch {report['torch']}.",
        "",
        "## Devices",
        "",
        "| device | SoC | peak allocated | peak reserved | capacity | reserved / capacity |",
        "|---|---|---|---|---|---|",
    ]
    for d in report["devices"]:
        lines.append(
            f"| {d['device']} | {d['soc']} | {_gib(d['peak_allocated_bytes'])} | "
            f"{_gib(d['peak_reserved_bytes'])} | {_gib(d['capacity_bytes'])} | {100 * d['peak_fraction']:.2f}% |"
        )
    total = sum(o["calls"] for o in report["operators"])
    lines += [
        "",
        f"## Operators ({total} calls, {len(report['operators'])} distinct; top {top} by host time)",
        "",
        "| operator | calls | host ms |",
        "|---|---|---|",
    ]
    lines += [f"| {o['operator']} | {o['calls']} | {o['host_ms']} |" for o in report["operators"][:top]]
    lines += ["", "## CPU fallbacks on Ascend", ""]
    if report["cpu_fallback"] is None:
        lines.append(NO_PROFILE + ".")
    elif not report["cpu_fallback"]:
        lines.append(f"None: every operator has an NPU kernel in torch_npu {report['torch_npu_profile']}.")
    else:
        lines += [
            f"Operators without an NPU kernel in torch_npu {report['torch_npu_profile']} (they run on the CPU "
            "there, with torch_npu's warning):",
            "",
            "| operator | calls | issued at |",
            "|---|---|---|",
        ]
        for f in report["cpu_fallback"]:
            sites = ", ".join(f"{s['line']} ({s['calls']})" for s in f["sites"])
            lines.append(f"| {f['operator']} | {f['calls']} | {sites} |")
    lines += ["", "## CUDA-only calls patched by transfer_to_npu", ""]
    patched = report["patched_cuda_calls"]
    lines += [f"- `{k}`: {v}" for k, v in patched.items()] if patched else ["None: the script is NPU-ready."]
    lines += ["", "## Warnings", ""]
    lines += [f"- {w['warning']} (x{w['count']})" for w in report["warnings"]] if report["warnings"] else ["None."]
    return "\n".join(lines) + "\n"


def _print(report, console):
    table = Table(title=f"Ascend readiness: {report['script']} (exit {report['exit_status']})")
    table.add_column("what")
    table.add_column("result")
    for d in report["devices"]:
        table.add_row(
            f"{d['device']} ({d['soc']})",
            f"peak {_gib(d['peak_reserved_bytes'])} of "
            f"{_gib(d['capacity_bytes'])} ({100 * d['peak_fraction']:.2f}%)",
        )
    table.add_row(
        "operators", f"{sum(o['calls'] for o in report['operators'])} calls, " f"{len(report['operators'])} distinct"
    )
    if report["cpu_fallback"] is None:
        table.add_row("CPU fallbacks", "unknown: no operator-support profile (run `vnpu ops sync`)")
    else:
        table.add_row(
            f"CPU fallbacks (torch_npu {report['torch_npu_profile']})",
            "\n".join(
                f"{f['operator']} x{f['calls']} at {f['sites'][0]['line'] if f['sites'] else '?'}"
                for f in report["cpu_fallback"]
            )
            or "none",
        )
    table.add_row(
        "CUDA calls patched", "\n".join(f"{k} x{v}" for k, v in report["patched_cuda_calls"].items()) or "none"
    )
    table.add_row("warnings", str(sum(w["count"] for w in report["warnings"])))
    console.print(table)


def run(args):
    if not os.path.exists(args.script):
        print(f"vnpu run: no such script: {args.script}", file=sys.stderr)
        return 2
    if args.report and suffix_problem(args.report):
        print(f"vnpu run: {suffix_problem(args.report)}", file=sys.stderr)
        return 2
    import torch_npu.contrib.transfer_to_npu  # noqa: F401 (before the script imports torch.cuda users)
    from torch_npu import _C

    recorder = _Recorder()
    _C._op_totals_start()
    original_show = warnings.showwarning
    warnings.showwarning = recorder.showwarning(original_show)
    try:
        status = _run_script(args.script, args.args)
    finally:
        recorder.ops = {name: list(entry) for name, entry in _C._op_totals_stop().items()}
        warnings.showwarning = original_show
    report = _report(args.script, status, recorder)
    _print(report, Console(stderr=True))
    if args.report:
        write_report(args.report, report, _markdown, title=f"Ascend readiness report: {args.script}")
    return status


def add_parser(sub):
    p = sub.add_parser("run", help="run a CUDA/NPU script on the virtual NPU and report Ascend readiness")
    p.add_argument("--report", metavar="FILE", help="also write the report (.md, .json or .html)")
    p.add_argument("script")
    p.add_argument("args", nargs="...", help="the script's arguments")
    p.set_defaults(func=run)
