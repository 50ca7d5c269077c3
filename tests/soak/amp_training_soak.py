"""Soak: N AMP training steps of a small CNN on npu, reporting loss, npu memory and the process's RSS;
fails when memory keeps growing after the warm-up (a leak). `make soak STEPS=3000`; not part of CI."""

import argparse
import sys

import torch
import torch.nn as nn

import torch_npu  # noqa: F401


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--report-every", type=int, default=250)
    parser.add_argument("--dtype", choices=["float16", "bfloat16"], default="float16")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 8 * 8, 10),
    ).npu()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.npu.amp.GradScaler(enabled=args.dtype == "float16")
    x, y = torch.randn(32, 3, 16, 16, device="npu"), torch.randint(0, 10, (32,), device="npu")
    warm = None
    print(f"{'step':>6} {'loss':>8} {'allocated MiB':>14} {'reserved MiB':>13} {'RSS MiB':>9}")
    for step in range(1, args.steps + 1):
        with torch.autocast("npu", dtype=getattr(torch, args.dtype)):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if step % args.report_every == 0 or step == args.steps:
            sample = (torch.npu.memory_allocated() / 2**20, torch.npu.memory_reserved() / 2**20, rss_mib())
            print(f"{step:>6} {loss.item():>8.4f} {sample[0]:>14.2f} {sample[1]:>13.2f} {sample[2]:>9.1f}", flush=True)
            if warm is None and step >= args.steps // 4:
                warm = sample
    grew = {name: now - then for name, now, then in zip(("allocated", "reserved", "RSS"), sample, warm)}
    print("growth after warm-up (MiB):", {k: round(v, 2) for k, v in grew.items()})
    leaked = grew["allocated"] > 1 or grew["reserved"] > 8 or grew["RSS"] > 64
    print("LEAK" if leaked else "flat")
    return 1 if leaked else 0


if __name__ == "__main__":
    sys.exit(main())
