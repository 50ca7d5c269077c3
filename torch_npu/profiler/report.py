"""The profiling report: one self-contained HTML file per session (`vnpu profile report DIR`,
`msprof --analyze=DIR --format=html`) a person reads at a glance.

Sections: top operators by device time (with a clearly labelled roofline estimate of the time on the
Ascend SoC when shapes were recorded), time per step split into computing / communication / free,
operators that would fall back to the CPU on Ascend, device memory over time, and bottleneck hints in
the spirit of seed 000's diagnosis table. It reads only ASCEND_PROFILER_OUTPUT's csv files (and the
session's device facts when vnpu wrote it), so it also reads sessions written by torch_npu.
"""

import collections
import csv
import datetime
import json
import os
import statistics
from html import escape

from torch_npu.profiler import roofline
from torch_npu.profiler import session as session_record
from torch_npu.profiler.report_charts import horizontal_bars, line_chart, stacked_columns

__all__ = ["REPORT_NAME", "write_report", "summarize"]

REPORT_NAME = "report.html"
_TOP = 15
_STYLE = """body{font-family:sans-serif;margin:24px;color:#222;max-width:1000px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f3f5f7}.note{color:#666;font-size:12px}
.hint{background:#fff7e6;border-left:4px solid #f08c00;padding:6px 10px;margin:6px 0}.ok{color:#2b8a3e}
.kpi{display:inline-block;margin-right:28px}.kpi b{display:block;font-size:20px}"""


def _read_csv(path):
    if not os.path.isfile(path):
        return None
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _float(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _device_facts(session_dir):
    raw = os.path.join(session_dir, session_record.RAW_FILE)
    if os.path.isfile(raw):
        with open(raw) as f:
            devices = json.load(f).get("devices", {})
        if devices:
            return next(iter(devices.values()))
    return {}


def summarize(session_dir):
    """The report's numbers as a dict (also what the tests check)."""
    out = os.path.join(session_dir, "ASCEND_PROFILER_OUTPUT")
    kernels = _read_csv(os.path.join(out, "kernel_details.csv"))
    if kernels is None:
        raise FileNotFoundError(
            f"{session_dir} has no ASCEND_PROFILER_OUTPUT/kernel_details.csv: not a parsed "
            "profiling session (run torch_npu.profiler.analyse on it first)"
        )
    device = _device_facts(session_dir)
    soc, tflops, gbps = roofline.soc_peaks(device.get("name"))
    ops = collections.OrderedDict()
    fallbacks = collections.OrderedDict()
    has_shapes = bool(kernels) and "Input Shapes" in kernels[0]
    for k in kernels:
        name, duration = k["Name"] or k["Type"], _float(k["Duration(us)"])
        entry = ops.setdefault(
            name,
            {
                "op": name,
                "core": k["Accelerator Core"],
                "count": 0,
                "total_us": 0.0,
                "estimate_us": 0.0 if has_shapes else None,
            },
        )
        entry["count"] += 1
        entry["total_us"] += duration
        if has_shapes:
            entry["estimate_us"] += (
                roofline.estimate_us(
                    name,
                    k.get("Input Shapes"),
                    k.get("Input Data Types"),
                    k.get("Output Shapes"),
                    k.get("Output Data Types"),
                    tflops,
                    gbps,
                )
                or 0.0
            )
        if k["Accelerator Core"] == "AI_CPU":
            f = fallbacks.setdefault(name, {"op": name, "count": 0, "total_us": 0.0})
            f["count"] += 1
            f["total_us"] += duration
    device_total = sum(o["total_us"] for o in ops.values())
    steps = [
        {
            "step": s["Step"],
            "computing": _float(s["Computing"]),
            "communication": _float(s["Communication(Not Overlapped)"]) + _float(s["Overlapped"]),
            "free": _float(s["Free"]),
        }
        for s in _read_csv(os.path.join(out, "step_trace_time.csv")) or []
    ]
    memory = _read_csv(os.path.join(out, "memory_record.csv")) or []
    return {
        "session": os.path.basename(os.path.normpath(session_dir)),
        "soc": soc,
        "device": device,
        "kernels": len(kernels),
        "device_total_us": device_total,
        "ops": sorted(ops.values(), key=lambda o: -o["total_us"]),
        "estimate_total_us": sum(o["estimate_us"] for o in ops.values()) if has_shapes else None,
        "fallbacks": sorted(fallbacks.values(), key=lambda f: -f["total_us"]),
        "steps": steps,
        "memory": [
            (_float(m["Timestamp(us)"]), _float(m["Total Allocated(MB)"]), _float(m["Total Reserved(MB)"]))
            for m in memory
            if m.get("Component", "PTA") == "PTA"
        ],
    }


def _hints(s):
    hints = []
    capacity_mb = s["device"].get("total_memory", 0) / 2**20
    if s["memory"]:
        peak_reserved = max(m[2] for m in s["memory"])
        peak_allocated = max(m[1] for m in s["memory"])
        if capacity_mb and peak_reserved > 0.8 * capacity_mb:
            hints.append(
                f"High memory: {peak_reserved:,.0f} MB reserved at peak of {capacity_mb:,.0f} MB. Let the "
                "caching allocator reuse and release memory: PYTORCH_NPU_ALLOC_CONF="
                "expandable_segments:True,garbage_collection_threshold:0.8; free references early; use "
                "activation checkpointing or a smaller micro-batch."
            )
        elif peak_reserved > 256 and peak_allocated < 0.5 * peak_reserved:
            hints.append(
                f"Fragmented cache: {peak_allocated:,.0f} MB allocated but {peak_reserved:,.0f} MB reserved. "
                "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True reduces fragmentation."
            )
    steps = s["steps"]
    if steps:
        steady = steps[1:] if len(steps) > 2 else steps  # the first step carries start-up and warm-up
        total = sum(st["computing"] + st["communication"] + st["free"] for st in steady) or 1
        free = sum(st["free"] for st in steady) / total
        if free > 0.3:
            hints.append(
                f"Low device utilisation: the device is idle {100 * free:.0f}% of the step time"
                f"{' after the first step' if steady is not steps else ''}. Feed it "
                "faster: DataLoader(num_workers=..., prefetch_factor=..., pin_memory=True), move host "
                "preprocessing off the training loop, avoid .item()/.cpu() synchronisations in the step."
            )
        comm = sum(st["communication"] for st in steady) / total
        if comm > 0.3:
            hints.append(
                f"Communication-bound: {100 * comm:.0f}% of the step is collective communication. Overlap it "
                "with computation (DDP bucket_cap_mb, gradient accumulation with no_sync)."
            )
        durations = [st["computing"] + st["communication"] + st["free"] for st in steps]
        if len(durations) >= 3 and durations[0] > 2 * statistics.median(durations[1:]):
            hints.append(
                f"Long first step: step {steps[0]['step']} took {durations[0] / 1000:,.1f} ms, "
                f"{durations[0] / statistics.median(durations[1:]):.1f}x the median of the others "
                "(first-call compilation and allocation). Warm up before measuring, or exclude it with "
                "schedule(skip_first=...)."
            )
    if s["fallbacks"]:
        names = ", ".join(f["op"] for f in s["fallbacks"][:5])
        hints.append(
            f"CPU fallbacks on Ascend: {names}{' ...' if len(s['fallbacks']) > 5 else ''} have no NPU "
            "kernel in the torch_npu profile and would run on the host with copies both ways. Replace them "
            "(torch_npu.npu_* fused operators) or keep them out of the training step."
        )
    if s["kernels"] and s["device_total_us"] / s["kernels"] < 20:
        hints.append(
            f"Small operators: {s['kernels']} kernels average {s['device_total_us'] / s['kernels']:.1f} us; "
            "launch overhead dominates on Ascend. Fuse them (torch_npu fused operators, torch.compile) or "
            "capture the step with torch.npu.NPUGraph."
        )
    return hints


def _table(header, rows):
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render(s):
    ops = s["ops"][:_TOP]
    estimate = s["estimate_total_us"] is not None
    header = ["operator", "core", "calls", "device time (us)", "share"] + (
        [f"estimated on {s['soc']} (us)"] if estimate else []
    )
    total = s["device_total_us"] or 1
    rows = [
        [o["op"], o["core"], o["count"], f"{o['total_us']:,.1f}", f"{100 * o['total_us'] / total:.1f}%"]
        + ([f"{o['estimate_us']:,.1f}"] if estimate else [])
        for o in ops
    ]
    kpis = [
        ("device time", f"{s['device_total_us'] / 1000:,.2f} ms"),
        ("kernels", f"{s['kernels']:,}"),
        ("steps", str(len(s["steps"]))),
        ("CPU fallbacks", str(sum(f["count"] for f in s["fallbacks"]))),
    ]
    if estimate:
        kpis.append((f"estimate on {s['soc']}", f"{s['estimate_total_us'] / 1000:,.2f} ms"))
    parts = [
        f"<h1>vnpu profiling report: {escape(s['session'])}</h1>",
        f"<p class='note'>Written {datetime.datetime.now():%Y-%m-%d %H:%M:%S}. Device time is what vnpu measured "
        f"running each operator's kernel on this host; SoC modelled: {escape(s['soc'])}.</p>",
        "<div>" + "".join(f"<span class='kpi'>{escape(k)}<b>{escape(v)}</b></span>" for k, v in kpis) + "</div>",
        "<h2 id='top-operators'>Top operators by device time</h2>",
        horizontal_bars([(o["op"], o["total_us"]) for o in ops], "top operators by device time"),
        _table(header, rows),
    ]
    if estimate:
        parts.append(
            "<p class='note'>ESTIMATE: a roofline model per kernel (max of FLOPs / peak cube throughput and "
            "bytes / HBM bandwidth, plus 2 us launch) from the recorded shapes and the SoC's published peaks; "
            "it ignores caches, occupancy, format conversions and overlap. Compare operators with it, do not "
            "read it as a prediction.</p>"
        )
    parts.append("<h2 id='steps'>Time per step</h2>")
    if s["steps"]:
        parts.append(
            stacked_columns(
                [(st["step"] or "all", st) for st in s["steps"]],
                ["computing", "communication", "free"],
                "time per step",
            )
        )
        parts.append(
            _table(
                ["step", "computing (us)", "communication (us)", "free (us)"],
                [
                    [
                        st["step"] or "all",
                        f"{st['computing']:,.1f}",
                        f"{st['communication']:,.1f}",
                        f"{st['free']:,.1f}",
                    ]
                    for st in s["steps"]
                ],
            )
        )
    else:
        parts.append("<p>No step data.</p>")
    parts.append("<h2 id='fallbacks'>Operators that would fall back to the CPU on Ascend</h2>")
    if s["fallbacks"]:
        parts.append(
            horizontal_bars([(f["op"], f["total_us"]) for f in s["fallbacks"][:_TOP]], "CPU fallbacks", color="#e8590c")
        )
        parts.append(
            _table(
                ["operator", "calls", "device time (us)"],
                [[f["op"], f["count"], f"{f['total_us']:,.1f}"] for f in s["fallbacks"]],
            )
        )
    else:
        parts.append(
            "<p class='ok'>None: every recorded operator has an NPU kernel (or no operator-support profile "
            "was active; run <code>vnpu ops sync</code>).</p>"
        )
    parts.append("<h2 id='memory'>Device memory over time</h2>")
    if s["memory"]:
        t0 = s["memory"][0][0]
        parts.append(
            line_chart(
                {
                    "allocated": [((t - t0) / 1000, a) for t, a, _ in s["memory"]],
                    "reserved": [((t - t0) / 1000, r) for t, _, r in s["memory"]],
                },
                "device memory",
            )
        )
        capacity = s["device"].get("total_memory")
        parts.append(
            f"<p>Peak allocated {max(m[1] for m in s['memory']):,.1f} MB, peak reserved "
            f"{max(m[2] for m in s['memory']):,.1f} MB"
            + (f" of {capacity / 2**20:,.0f} MB on the device" if capacity else "")
            + ".</p>"
        )
    else:
        parts.append(
            "<p>Not recorded: profile with profile_memory=True (or <code>vnpu profile --profile-memory</code>).</p>"
        )
    parts.append("<h2 id='hints'>Bottleneck hints</h2>")
    hints = _hints(s)
    parts += [f"<div class='hint'>{escape(h)}</div>" for h in hints] or ["<p class='ok'>No bottleneck stands out.</p>"]
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>vnpu profile {escape(s['session'])}"
        f"</title><style>{_STYLE}</style></head><body>{''.join(parts)}</body></html>"
    )


def write_report(session_dir, path=None):
    """Writes the report of one parsed session (default `<session>/report.html`); returns its path."""
    target = path or os.path.join(session_dir, REPORT_NAME)
    html = render(summarize(session_dir))
    with open(target, "w", encoding="utf-8") as f:
        f.write(html)
    return target
