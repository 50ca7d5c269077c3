"""npu_fusion_attention forward + backward against PyTorch's scaled_dot_product_attention on the CPU,
in one process (B=2, N=8, S=512, D=64, float32, BNSD). Bar: npu / cpu <= 1.10 (median of rounds).

    python bench/bench_fusion_attention.py [--quick]
"""

import argparse
import json
import os
import statistics

import torch
import torch.nn.functional as F
from _timing import best_of

import torch_npu

BAR = 1.10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    repeats = 3 if args.quick else 7
    b, n, s, d = 2, 8, 512, 64
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, s, d) for _ in range(3))
    grad = torch.randn(b, n, s, d)
    qn, kn, vn, gn = q.npu(), k.npu(), v.npu(), grad.npu()

    def cpu_step():
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        F.scaled_dot_product_attention(*leaves, scale=d**-0.5).backward(grad)

    def npu_step():
        leaves = [t.detach().requires_grad_() for t in (qn, kn, vn)]
        torch_npu.npu_fusion_attention(*leaves, n, "BNSD", scale=d**-0.5)[0].backward(gn)

    cpu_us, npu_us = [], []
    for _ in range(repeats):
        cpu_us.append(best_of(cpu_step, 3))
        npu_us.append(best_of(npu_step, 3))
    c, m = statistics.median(cpu_us), statistics.median(npu_us)
    row = {
        "case": "npu_fusion_attention fwd+bwd vs SDPA (cpu), B=2 N=8 S=512 D=64 fp32",
        "cpu_ms": round(c / 1e3, 2),
        "npu_ms": round(m / 1e3, 2),
        "ratio": round(m / c, 3),
        "bar": BAR,
    }
    print(f"{row['case']}: cpu {row['cpu_ms']} ms, npu {row['npu_ms']} ms, ratio {row['ratio']} (bar <= {BAR})")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "fusion_attention.json")
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "repeats": repeats, "rows": [row]}, f, indent=1)
    if m / c > BAR:
        print(f"over the bar: npu_fusion_attention is {m / c:.2f}x SDPA (bar {BAR})")


if __name__ == "__main__":
    main()
