"""NPU graph replay against eager execution of the same npu work, in one process.

A small inference model (many small operators, where host time dominates) runs eagerly on npu and
as a captured torch.npu.NPUGraph replay; both must produce bit-identical outputs. Reported: host
microseconds per call (median over --repeats rounds, best of 3 inner loops each) and the ratio
replay / eager, which must stay below 1.

    python bench/bench_graphs.py            # table + bench/results/graphs.json
    python bench/bench_graphs.py --quick
"""

import argparse
import json
import os
import statistics

import torch
import torch.nn as nn
from _timing import best_of

import torch_npu  # noqa: F401

BAR = 1.0  # replay must cost less host time than eager


def build(width, depth):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.LayerNorm(width), nn.GELU()]
    return nn.Sequential(*layers).to("npu").eval()


def measure(width, depth, repeats, iters):
    model = build(width, depth)
    static_x = torch.randn(8, width, device="npu")
    with torch.no_grad():
        model(static_x)  # warm-up
        graph = torch.npu.NPUGraph()
        with torch.npu.graph(graph):
            static_y = model(static_x)
        new_x = torch.randn(8, width, device="npu")
        static_x.copy_(new_x)
        graph.replay()
        expected = model(new_x)
        if not torch.equal(static_y.cpu(), expected.cpu()):
            raise SystemExit("graph replay differs from eager")

        def eager():
            model(static_x)

        eager_us, replay_us = [], []
        for _ in range(repeats):
            eager_us.append(best_of(eager, iters))
            replay_us.append(best_of(graph.replay, iters))
    e, r = statistics.median(eager_us), statistics.median(replay_us)
    return {
        "case": f"{depth}x(Linear {width} + LayerNorm + GELU), batch 8",
        "ops": graph._recording.size(),
        "eager_us": round(e, 1),
        "replay_us": round(r, 1),
        "ratio": round(r / e, 3),
        "bar": BAR,
        "identical": True,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    repeats = 3 if args.quick else args.repeats
    rows = [measure(64, 8, repeats, 50), measure(256, 4, repeats, 50)]
    print(f"{'case':46} {'ops':>4} {'eager us':>9} {'replay us':>10} {'ratio':>6}")
    for row in rows:
        print(f"{row['case']:46} {row['ops']:4d} {row['eager_us']:9.1f} {row['replay_us']:10.1f} {row['ratio']:6.3f}")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "graphs.json")
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "repeats": repeats, "rows": rows}, f, indent=1)
    failed = [r for r in rows if r["ratio"] >= BAR]
    if failed:
        raise SystemExit(f"graph replay is not cheaper than eager: {failed}")


if __name__ == "__main__":
    main()
