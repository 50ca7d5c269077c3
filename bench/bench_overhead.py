"""Overhead of the npu device against plain CPU PyTorch, measured in one process.

Each case runs the same code on "cpu" and on "npu"; the ratio is npu time / cpu time. Every
number is the median over --repeats rounds; in each round the two devices are timed back to back
(best of a few inner loops), so drifting machine load affects both sides alike.

    python bench/bench_overhead.py            # prints a table, writes bench/results/overhead.json
    python bench/bench_overhead.py --quick    # fewer repeats (CI smoke run)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
from _models import Block
from _timing import best_of

import torch_npu  # noqa: F401

BARS = {
    "a + 1 (10 elements)": 1.15,
    "matmul 256x256": 1.01,
    "MLP train step": 1.03,
    "ConvNet train step": 1.03,
    "transformer block train step": 1.03,
    "AMP bf16 train step": 1.03,
}


def add_case(device):
    a = torch.randn(10, device=device)
    return lambda: a + 1


def matmul_case(device):
    a = torch.randn(256, 256, device=device)
    b = torch.randn(256, 256, device=device)
    return lambda: a @ b


def mlp_case(device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(32, 64).to(device)
    y = torch.randint(0, 10, (32,)).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def conv_case(device):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(8, 3, 32, 32).to(device)
    y = torch.randint(0, 10, (8,)).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def transformer_case(device):
    torch.manual_seed(0)
    model = nn.Sequential(Block(64), Block(64)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(4, 32, 64).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()

    return step


def amp_case(device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 64).to(device)
    y = torch.randint(0, 10, (32,)).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


CASES = [
    ("a + 1 (10 elements)", add_case, 20000),
    ("matmul 256x256", matmul_case, 300),
    ("MLP train step", mlp_case, 300),
    ("ConvNet train step", conv_case, 40),
    ("transformer block train step", transformer_case, 40),
    ("AMP bf16 train step", amp_case, 200),
]


def measure_import(repeats):
    """(seconds `import torch_npu` adds to `import torch` inside one interpreter, seconds a whole
    `python -c "import torch"` process takes longer with vnpu autoloaded than without), medians of fresh
    interpreters run alternately, with torch_npu's bytecode compiled as an installed package has it (into a
    private cache: this machine sets PYTHONDONTWRITEBYTECODE, which would otherwise charge every run with
    compiling the sources). The process figure includes the interpreter's exit."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, PYTHONPYCACHEPREFIX=cache)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        package = os.path.dirname(torch_npu.__file__)
        subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True, env=env)
        plain = dict(env, TORCH_DEVICE_BACKEND_AUTOLOAD="0")

        def in_process():  # timed after `import torch`, so torch's own noise stays out
            code = "import time, torch; t = time.perf_counter(); import torch_npu; print(time.perf_counter() - t)"
            done = subprocess.run([sys.executable, "-c", code], check=True, env=plain, capture_output=True, text=True)
            return float(done.stdout.split()[-1])

        def process(environment):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import torch"], check=True, env=environment)
            return time.perf_counter() - start

        inside = statistics.median(in_process() for _ in range(repeats))
        autoloaded, without = [], []
        for _ in range(repeats):
            autoloaded.append(process(dict(env, TORCH_DEVICE_BACKEND_AUTOLOAD="1")))
            without.append(process(plain))
        return inside, statistics.median(autoloaded) - statistics.median(without)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0 = PyTorch default)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "overhead.json"))
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    if args.threads:
        torch.set_num_threads(args.threads)
    results = {}
    for name, make, iters in CASES:
        iters = max(1, iters // 4) if args.quick else iters
        cpu_fn, npu_fn = make("cpu"), make("npu")
        for fn in (cpu_fn, npu_fn):  # warm up caches and the allocator
            for _ in range(min(iters, 50)):
                fn()
        cpu_times, npu_times, ratios = [], [], []
        for _ in range(repeats):
            c = best_of(cpu_fn, iters)
            n = best_of(npu_fn, iters)
            cpu_times.append(c)
            npu_times.append(n)
            ratios.append(n / c)
        results[name] = {
            "cpu_us": statistics.median(cpu_times),
            "npu_us": statistics.median(npu_times),
            "ratio": statistics.median(ratios),
            "bar": BARS[name],
        }
        r = results[name]
        print(
            f"{name:30s} cpu {r['cpu_us']:10.2f} us  npu {r['npu_us']:10.2f} us  "
            f"ratio {r['ratio']:.3f}  (bar <= {r['bar']})",
            flush=True,
        )
    inside, autoload = measure_import(3 if args.quick else 7)
    results["import torch_npu (s)"] = {"seconds": inside, "bar": 0.5}
    results["python -c 'import torch', autoloaded - plain (s)"] = {"seconds": autoload, "bar": 0.15}
    print(f"import torch_npu adds {inside:.3f} s to import torch in one interpreter (bar <= 0.5 s); a whole")
    print(f"`python -c 'import torch'` takes {autoload:.3f} s longer with vnpu autoloaded (bar <= 0.15 s)")
    meta = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "repeats": repeats,
        "cpu_count": os.cpu_count(),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)
    failed = [k for k, v in results.items() if v.get("ratio", v.get("seconds", 0)) > v["bar"]]
    if failed:
        print("over the bar:", ", ".join(failed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
