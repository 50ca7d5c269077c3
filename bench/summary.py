"""One view of every benchmark's results: bench/results/summary.json, a chart (summary.svg: each case's
measurement against its bar, and all_reduce bandwidth against message size for 2 / 4 / 8 ranks, gloo and
memcpy), and the benchmark tables of README.md and README.zh.md, written between their markers.

    python bench/summary.py          # after the benchmarks ran (bench/run_all.py runs them, then this)
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "docs"))
from readme_sections import replace_section  # noqa: E402

START, END = "<!-- bench-results:start -->", "<!-- bench-results:end -->"
HEADERS = {
    "README.md": ("benchmark", "case", "measured", "bar", "met"),
    "README.zh.md": ("基准", "用例", "结果", "目标", "达标"),
}


def _row(bench, case, value, bar, unit="x"):
    return {"bench": bench, "case": case, "value": value, "bar": bar, "unit": unit}


def _overhead(d):
    for case, r in d["results"].items():
        if "seconds" in r:
            yield _row("overhead", case.replace(" (s)", ""), r["seconds"], r["bar"], "s")
        else:
            yield _row("overhead", f"{case}, npu / cpu", r["ratio"], r["bar"])


def _rows_of(bench, key="ratio"):
    return lambda d: (_row(bench, r["case"], r[key], r["bar"]) for r in d["rows"])


def _compile(d):
    for r in d["steps"]:
        yield _row("compile", f"{r['case']}: compiled step, npu / cpu", r["npu_over_cpu"], r["bar"])
    for r in d["first_compile"]:
        yield _row("compile", f"{r['case']}: first compile, npu / cpu", r["ratio"], r["bar"])
    for mode, r in d["replay"].items():
        yield _row("compile", f"{mode} replay / eager ({r['case']})", r["ratio"], r["bar"])


def _fallback(d):
    for case, r in d["results"].items():
        yield _row("fallback_check", f"{case}, with / without a profile", r["ratio"], r["bar"])


def _migrate(d):
    yield _row("migrate", f"vnpu migrate, {d['files']} files", d["seconds"], d["bar_seconds"], "s")


def _profiler(d):
    yield _row("profiler", "profiled step / unprofiled", d["profiled_default"]["ratio"], d["profiled_default"]["bar"])


def _distributed(d):
    for case, ratio in d["ratios"].items():
        label = case if case.startswith("memcpy") else f"{case}, hccl / gloo"
        yield _row("distributed", f"{label}, {d['ranks']} ranks", ratio, d["bars"][case])


READERS = {
    "overhead.json": _overhead,
    "fusion_attention.json": _rows_of("fusion_attention"),
    "graphs.json": _rows_of("graphs"),
    "compile.json": _compile,
    "fallback_check.json": _fallback,
    "migrate.json": _migrate,
    "profiler.json": _profiler,
    "distributed.json": _distributed,
}


def collect(results=RESULTS):
    """Every result row, with `met` (value <= bar), in a fixed order; missing result files are listed."""
    rows, missing = [], []
    for name, reader in READERS.items():
        path = os.path.join(results, name)
        if not os.path.exists(path):
            missing.append(name)
            continue
        with open(path) as f:
            for row in reader(json.load(f)):
                rows.append(dict(row, met=row["value"] <= row["bar"]))
    return rows, missing


def _fmt(value, unit):
    if unit == "s":
        return f"{value:.2f} s" if round(value, 2) else "0.00 s"  # within ±5 ms: not "-0.00 s"
    return f"{value:.3f}"


def table(rows, headers):
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        cells = (f"`{r['bench']}`", r["case"], f"**{_fmt(r['value'], r['unit'])}**", f"≤ {_fmt(r['bar'], r['unit'])}")
        lines.append("| " + " | ".join(cells) + f" | {'✓' if r['met'] else '✗'} |")
    return "\n".join(lines)


def write_readme(path, rows, headers):
    """Replaces the text between the README's markers with the table; refuses a README without them."""
    replace_section(path, START, END, table(rows, headers), "benchmark table")


def chart(rows, distributed, path):
    """summary.svg; returns False (and says why) when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no chart (pip install matplotlib)")
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(15, max(6, 0.32 * len(rows))), width_ratios=(3, 2))
    labels = [f"{r['bench']}: {r['case']}" for r in rows]
    fractions = [r["value"] / r["bar"] for r in rows]
    left.barh(range(len(rows)), fractions, color=["tab:green" if r["met"] else "tab:red" for r in rows])
    left.axvline(1.0, color="black", linewidth=1)
    left.set_yticks(range(len(rows)), labels, fontsize=7)
    left.invert_yaxis()
    left.set_xlabel("measured / bar (≤ 1 meets the bar)")
    if distributed:
        for world, found in sorted(distributed["worlds"].items(), key=lambda kv: int(kv[0])):
            sizes = list(found["all_reduce"])
            mib = [float(s.split()[0]) for s in sizes]
            (line,) = right.plot(mib, [found["all_reduce"][s]["hccl_GiBps"] for s in sizes], marker="o")
            right.plot(
                mib, [found["all_reduce"][s]["gloo_GiBps"] for s in sizes], linestyle="--", color=line.get_color()
            )
            line.set_label(f"hccl, {world} ranks (gloo dashed)")
        right.axhline(distributed["memcpy_GiBps"], color="black", linestyle=":", label="memcpy, one process")
        right.set_xscale("log", base=2)
        right.set_xlabel("all_reduce message (MiB, float32)")
        right.set_ylabel("algorithm bandwidth (GiB/s)")
        right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)
    return True


def main():
    rows, missing = collect()
    if missing:
        print("no results yet:", ", ".join(missing))
    distributed = None
    if os.path.exists(os.path.join(RESULTS, "distributed.json")):
        with open(os.path.join(RESULTS, "distributed.json")) as f:
            distributed = json.load(f)
    with open(os.path.join(RESULTS, "summary.json"), "w") as f:
        json.dump({"rows": rows, "missing": missing}, f, indent=1, ensure_ascii=False)
    chart(rows, distributed, os.path.join(RESULTS, "summary.svg"))
    for readme, headers in HEADERS.items():
        write_readme(os.path.join(ROOT, readme), rows, headers)
    met = sum(r["met"] for r in rows)
    print(f"{met} of {len(rows)} cases meet their bars; over:")
    for r in rows:
        if not r["met"]:
            print(f"  {r['bench']}: {r['case']} {_fmt(r['value'], r['unit'])} (bar {_fmt(r['bar'], r['unit'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
