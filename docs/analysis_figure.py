"""Draws docs/msprof_analyze_cluster.png from msprof-analyze's `-m all` output of a profiled job:
each rank's step time split (cluster_step_trace_time.csv) and the bytes on each link of the
communication matrix (cluster_communication_matrix.json).

    python docs/analysis_figure.py <profiling dir>/cluster_analysis_output docs/msprof_analyze_cluster.png
"""

import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def step_split(output):
    with open(os.path.join(output, "cluster_step_trace_time.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r["Type"] == "rank"]
    totals = {}
    for r in rows:
        rank = totals.setdefault(int(r["Index"]), [0.0, 0.0, 0.0])
        for i, column in enumerate(("Computing", "Communication(Not Overlapped)", "Free")):
            rank[i] += float(r[column]) / 1000.0
    return dict(sorted(totals.items()))


def link_bytes(output):
    matrix = json.load(open(os.path.join(output, "cluster_communication_matrix.json")))
    links = {}
    for steps in matrix.values():
        for ops in steps.values():
            for op, op_links in ops.items():
                if op.startswith("Total Op Info"):
                    continue
                for link, info in op_links.items():
                    src, dst = (int(r) for r in link.split("-"))
                    if src != dst:
                        links[(src, dst)] = links.get((src, dst), 0.0) + info["Transit Size(MB)"]
    return links


def main(output, picture):
    split, links = step_split(output), link_bytes(output)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    ranks = list(split)
    bottom = [0.0] * len(ranks)
    for i, (label, color) in enumerate(
        (("Computing", "#4c72b0"), ("Communication (not overlapped)", "#dd8452"), ("Free", "#bbbbbb"))
    ):
        values = [split[r][i] for r in ranks]
        left.bar([f"rank {r}" for r in ranks], values, bottom=bottom, label=label, color=color)
        bottom = [b + v for b, v in zip(bottom, values)]
    left.set_ylabel("ms over the profiled steps")
    left.set_title("cluster_step_trace_time.csv")
    left.legend(fontsize=8)
    n = max(max(max(k) for k in links), max(ranks)) + 1 if links else len(ranks)
    grid = [[links.get((s, d), 0.0) for d in range(n)] for s in range(n)]
    image = right.imshow(grid, cmap="Blues")
    peak = max(max(row) for row in grid) or 1.0
    for s in range(n):
        for d in range(n):
            color = "white" if grid[s][d] > peak / 2 else "black"
            right.text(d, s, f"{grid[s][d]:.2f} MB", ha="center", va="center", fontsize=9, color=color)
    right.set_xticks(range(n), [f"to {d}" for d in range(n)])
    right.set_yticks(range(n), [f"from {s}" for s in range(n)])
    right.set_title("cluster_communication_matrix.json")
    fig.colorbar(image, ax=right, label="MB sent")
    fig.suptitle("msprof-analyze -m all on a 2-rank DDP job profiled on vnpu")
    fig.tight_layout()
    fig.savefig(picture, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
