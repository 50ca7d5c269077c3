"""Profiling overhead: a small CNN training step (conv-bn-relu x2, linear, SGD) on npu with
torch_npu.profiler recording (default activities CPU + NPU, as torch_npu's default) against the same
step unprofiled, alternating in one process; the ratio of medians over rounds (bar <= 1.15). Also
times the profile with record_shapes + profile_memory + with_stack. Writes bench/results/profiler.json."""

import argparse
import json
import os
import statistics
import sys
import time

import torch

import torch_npu

BAR = 1.15
HERE = os.path.dirname(os.path.abspath(__file__))


def _model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.BatchNorm2d(32),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(32 * 8 * 8, 10),
    ).npu()
    return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def _steps(model, opt, x, y, n):
    loss_fn = torch.nn.functional.cross_entropy
    start = time.perf_counter()
    for _ in range(n):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    torch.npu.synchronize()
    return (time.perf_counter() - start) / n


def _profiled(model, opt, x, y, n, **options):
    with torch_npu.profiler.profile(**options):  # no on_trace_ready: recording cost only, as in training
        return _steps(model, opt, x, y, n)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "profiler.json"))
    args = parser.parse_args()
    model, opt = _model()
    x, y = torch.randn(32, 3, 32, 32, device="npu"), torch.randint(0, 10, (32,), device="npu")
    _steps(model, opt, x, y, 10)
    _profiled(model, opt, x, y, 5)
    plain, default, full = [], [], []
    for _ in range(args.rounds):
        plain.append(_steps(model, opt, x, y, args.steps))
        default.append(_profiled(model, opt, x, y, args.steps))
        full.append(_profiled(model, opt, x, y, args.steps, record_shapes=True, profile_memory=True, with_stack=True))
    base = statistics.median(plain)
    results = {
        "step_ms_unprofiled": base * 1e3,
        "profiled_default": {"ratio": statistics.median(default) / base, "bar": BAR},
        "profiled_shapes_memory_stack": {"ratio": statistics.median(full) / base},
    }
    print(f"small CNN training step: {base * 1e3:.2f} ms unprofiled")
    print(f"  profiled (CPU+NPU)                     {results['profiled_default']['ratio']:.3f}x (bar <= {BAR})")
    print(f"  profiled + shapes + memory + stacks    {results['profiled_shapes_memory_stack']['ratio']:.3f}x")
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
