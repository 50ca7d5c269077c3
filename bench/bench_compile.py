"""torch.compile on npu against torch.compile on the CPU, in one process, one intra-op thread.

Times are the CPU time of the (single) working thread, so that time the hypervisor gives to other
machines does not count. Train steps (forward, backward, SGD) of three models compiled with inductor,
on npu and on the CPU:
an MLP with GELU and LayerNorm, a small CNN with BatchNorm, and a 2-layer GPT block. Reported (medians
of --repeats rounds, best of 3 inner loops each):

* compiled npu / compiled CPU per step (bar 1.05),
* compiled npu / eager npu for the MLP step,
* first-compile time npu / CPU (bar 1.2; a fresh inductor cache directory for each, so both compile
  their kernels),
* mode="reduce-overhead" and backend="npugraphs" replay host time / eager for a 24-operator
  inference graph (bar 0.8).

    python bench/bench_compile.py           # table + bench/results/compile.json
    python bench/bench_compile.py --quick
"""

import argparse
import functools
import json
import os
import statistics
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from _models import Block
from _timing import best_of as _best_of

import torch_npu  # noqa: F401

# One intra-op thread: the thread's CPU time is the work, whatever else the machine is doing.
best_of = functools.partial(_best_of, clock=time.thread_time)

STEP_BAR, FIRST_COMPILE_BAR, REPLAY_BAR = 1.05, 1.2, 0.8


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(256, 512),
            nn.LayerNorm(512),
            nn.GELU(),
            nn.Linear(512, 512),
            nn.LayerNorm(512),
            nn.GELU(),
            nn.Linear(512, 10),
        )

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.features(x))


class GPT(nn.Module):
    def __init__(self, vocab=256, d=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(Block(d), Block(d))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        return self.head(self.ln(self.blocks(self.emb(idx))))


def cases():
    g = torch.Generator().manual_seed(0)
    return {
        "MLP (GELU + LayerNorm), batch 64": (
            MLP,
            torch.randn(64, 256, generator=g),
            torch.randint(0, 10, (64,), generator=g),
        ),
        "CNN (conv + BatchNorm), 16x3x32x32": (
            CNN,
            torch.randn(16, 3, 32, 32, generator=g),
            torch.randint(0, 10, (16,), generator=g),
        ),
        "GPT, 2 blocks, 8x64 tokens": (
            GPT,
            torch.randint(0, 256, (8, 64), generator=g),
            torch.randint(0, 256, (8, 64), generator=g),
        ),
    }


def train_step(model, opt, x, y):
    out = model(x)
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def prepared(make, x, y, device, compiled):
    torch.manual_seed(0)
    model = make().to(device)
    # The same optimizer algorithm on both devices: by default PyTorch picks its foreach implementation
    # for accelerators (npu included) and the per-parameter loop for the CPU, which would compare two
    # optimizers (eager code, ~2% apart) rather than two compilers.
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=False)
    run = torch.compile(model) if compiled else model
    x, y = x.to(device), y.to(device)
    return lambda: train_step(run, opt, x, y)


def first_compile_seconds(make, x, y, device):
    torch._dynamo.reset()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        step = prepared(make, x, y, device, compiled=True)
        start = time.perf_counter()
        step()
        seconds = time.perf_counter() - start
    os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    return seconds


def replay_case(repeats, iters):
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU()]
    model = nn.Sequential(*layers).to("npu").eval()
    x = torch.randn(8, 64, device="npu")
    out = {}
    with torch.no_grad():
        expected = model(x)
        runs = {"eager": lambda: model(x)}
        for name, kwargs in (("reduce-overhead", {"mode": "reduce-overhead"}), ("npugraphs", {"backend": "npugraphs"})):
            torch._dynamo.reset()
            compiled = torch.compile(model, **kwargs)
            for _ in range(3):  # warm-up, capture, replay
                result = compiled(x)
            torch.testing.assert_close(result, expected, rtol=1e-5, atol=1e-5)
            runs[name] = (lambda c: lambda: c(x))(compiled)
        times = {name: [] for name in runs}
        for _ in range(repeats):
            for name, fn in runs.items():
                times[name].append(best_of(fn, iters))
    eager = statistics.median(times["eager"])
    for name in ("reduce-overhead", "npugraphs"):
        t = statistics.median(times[name])
        out[name] = {
            "case": "8 x (Linear 64 + LayerNorm + GELU), 24 operators, batch 8",
            "eager_us": round(eager, 1),
            "replay_us": round(t, 1),
            "ratio": round(t / eager, 3),
            "bar": REPLAY_BAR,
        }
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--steps-only", action="store_true", help="only the train-step ratios")
    args = parser.parse_args()
    repeats, iters = (2, 5) if args.quick else (args.repeats, 10)
    torch.set_num_threads(1)
    results = {"steps": [], "first_compile": [], "replay": {}}
    for name, (make, x, y) in cases().items():
        runs = {
            (device, compiled): prepared(make, x, y, device, compiled)
            for device in ("cpu", "npu")
            for compiled in (True, False)
        }
        for step in runs.values():
            for _ in range(3):
                step()
        times = {key: [] for key in runs}
        # compiled cpu and compiled npu back to back, alternating which goes first; eager npu separately
        for r in range(repeats):
            order = [("cpu", True), ("npu", True)] if r % 2 == 0 else [("npu", True), ("cpu", True)]
            for key in order:
                times[key].append(best_of(runs[key], iters))
        for _ in range(repeats):
            times[("npu", False)].append(best_of(runs[("npu", False)], iters))
        med = {key: statistics.median(v) for key, v in times.items() if v}
        # each round times both back to back: the median of the rounds' ratios cancels the machine's drift
        ratio = statistics.median(n / c for n, c in zip(times[("npu", True)], times[("cpu", True)]))
        results["steps"].append(
            {
                "case": name,
                "compiled_cpu_us": round(med[("cpu", True)], 1),
                "compiled_npu_us": round(med[("npu", True)], 1),
                "eager_npu_us": round(med[("npu", False)], 1),
                "npu_over_cpu": round(ratio, 3),
                "bar": STEP_BAR,
                "compiled_over_eager_npu": round(med[("npu", True)] / med[("npu", False)], 3),
            }
        )
        print(
            f"{name:38s} compiled npu {med[('npu', True)]:9.1f} us  compiled cpu {med[('cpu', True)]:9.1f} us  "
            f"ratio {ratio:.3f} (bar {STEP_BAR})  compiled/eager npu {med[('npu', True)] / med[('npu', False)]:.3f}"
        )
    if args.steps_only:
        return
    for name, (make, x, y) in cases().items():
        cpu = [first_compile_seconds(make, x, y, "cpu") for _ in range(1 if args.quick else 2)]
        npu = [first_compile_seconds(make, x, y, "npu") for _ in range(1 if args.quick else 2)]
        ratio = statistics.median(npu) / statistics.median(cpu)
        results["first_compile"].append(
            {
                "case": name,
                "cpu_s": round(statistics.median(cpu), 2),
                "npu_s": round(statistics.median(npu), 2),
                "ratio": round(ratio, 3),
                "bar": FIRST_COMPILE_BAR,
            }
        )
        print(
            f"first compile {name:38s} npu {statistics.median(npu):6.2f} s  cpu {statistics.median(cpu):6.2f} s  "
            f"ratio {ratio:.3f} (bar {FIRST_COMPILE_BAR})"
        )
    results["replay"] = replay_case(repeats, iters * 5)
    for name, r in results["replay"].items():
        print(
            f"{name:16s} replay {r['replay_us']:7.1f} us  eager {r['eager_us']:7.1f} us  ratio {r['ratio']:.3f} "
            f"(bar {REPLAY_BAR})"
        )
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), "results", "compile.json"), "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
