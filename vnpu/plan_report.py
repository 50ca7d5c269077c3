"""How `vnpu plan` shows its report: terminal tables (rich) and Markdown (also rendered to HTML).

Per process and device: the allocated and reserved peaks, fragmentation, retries and OOMs, and where the
allocated peak happened (operator, module, program line); the peaks of every step; the biggest tensors
alive at the peak. Per SoC: the verdict and the estimated step time."""

from rich.table import Table

_GIB = 2**30


def size(nbytes):
    """Bytes for people: 512 B, 1.00 MiB, 13.50 GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} B"


def verdict_text(v, status=0):
    gib = abs(v["margin_bytes"]) / _GIB
    if v["fits"] is None:
        return f"unknown: the program failed (exit status {status}) before it finished"
    if v["fits"]:
        return f"fits ({gib:.2f} GiB free)"
    where = f"; runs out at {v['runs_out_at']}" if v.get("runs_out_at") else ""
    return f"does not fit by {gib:.2f} GiB{where}"


def fragmentation(d):
    reserved = d["reserved_bytes.all.peak"]
    return 0.0 if reserved == 0 else 1 - d["allocated_bytes.all.peak"] / reserved


def peak_at(d):
    """Where the allocated peak happened: operator, module, program line (what is known)."""
    parts = [d["peak_operator"]]
    if d["peak_module"]:
        parts.append(f"in {d['peak_module']}")
    if d["peak_site"]:
        parts.append(f"at {d['peak_site']}")
    return " ".join(p for p in parts if p)


def step_names(steps):
    """A step ends when an optimizer steps; what follows the last one is shown as such."""
    closed = len(steps) - 1
    if closed == 0:
        return ["whole run"]
    return [str(i + 1) for i in range(closed)] + [f"after step {closed}"]


def _rows(report):
    memory = [
        (
            str(d["rank"]),
            f"npu:{d['device']}",
            size(d["allocated_bytes.all.peak"]),
            size(d["reserved_bytes.all.peak"]),
            f"{fragmentation(d):.1%}",
            str(d["num_alloc_retries"]),
            str(d["num_ooms"]),
            peak_at(d),
        )
        for d in report["devices"]
    ]
    verdicts = [
        (
            v["soc"],
            f"{v['hbm_bytes'] / _GIB:.0f} GiB",
            verdict_text(v, report.get("exit_status", 0)),
            f"{v['step_seconds']:.4f} s",
            f"{v['compute_seconds']:.4f} s",
            f"{v['communication_seconds']:.4f} s",
        )
        for v in report["verdicts"]
    ]
    steps = [
        (str(d["rank"]), f"npu:{d['device']}", name, size(s["allocated_peak"]), size(s["reserved_peak"]))
        for d in report["devices"]
        for name, s in zip(step_names(d["steps"]), d["steps"])
    ]
    return memory, verdicts, steps


_MEMORY = ("rank", "device", "peak allocated", "peak reserved", "fragmentation", "retries", "OOMs", "peak at")
_VERDICTS = ("SoC", "HBM", "verdict", "est. step", "compute", "communication")
_STEPS = ("rank", "device", "step", "allocated peak", "reserved peak")
_BIGGEST = ("size", "tensor", "made by", "module")


def _biggest(d):
    return [
        (size(b["bytes"]), b["name"] or "-", b["operator"] or "-", b["module"] or "-") for b in d["biggest_at_peak"]
    ]


def _table_lines(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]


def markdown(report):
    memory, verdicts, steps = _rows(report)
    lines = [f"# vnpu plan: `{' '.join(report['command'])}`", "", f"Modelled SoC: {report['modelled_soc']}", ""]
    lines += ["## Memory per device", "", *_table_lines(_MEMORY, memory), ""]
    lines += ["## Verdict per SoC", "", *_table_lines(_VERDICTS, verdicts), ""]
    lines += ["## Peaks of each step", "", *_table_lines(_STEPS, steps), ""]
    for d in report["devices"]:
        lines += [f"## Biggest tensors alive at the peak (rank {d['rank']}, npu:{d['device']})", ""]
        lines += [*_table_lines(_BIGGEST, _biggest(d)), ""]
    lines += ["Times are roofline estimates (see `vnpu plan --help`), not measurements."]
    return "\n".join(lines) + "\n"


def _table(title, header, rows):
    table = Table(title=title)
    for column in header:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    return table


def show(report, console):
    """The terminal view: memory, verdicts, step peaks, and the biggest tensors of the device whose
    allocated peak is highest (the report file has every device's)."""
    memory, verdicts, steps = _rows(report)
    console.print(_table(f"Memory (modelled SoC {report['modelled_soc']})", _MEMORY, memory))
    console.print(_table("Verdict per SoC (times are roofline estimates)", _VERDICTS, verdicts))
    console.print(_table("Peaks of each step", _STEPS, steps))
    if report["devices"]:
        top = max(report["devices"], key=lambda d: d["allocated_bytes.all.peak"])
        title = f"Biggest tensors alive at the peak (rank {top['rank']}, npu:{top['device']})"
        console.print(_table(title, _BIGGEST, _biggest(top)))
