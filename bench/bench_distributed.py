"""hccl on npu against raw gloo on CPU tensors, 2 / 4 / 8 ranks on this machine, in the same processes:
all_reduce of 64 KiB .. 64 MiB (time and algorithm bandwidth, bytes / time), and a DDP training step of a
small CNN. Medians of alternating repeats. The physical limit is the machine's single-process memcpy
bandwidth, measured here too. Writes bench/results/distributed.json.

Bars (4 ranks): all_reduce 64 MiB hccl / gloo <= 0.4, DDP step <= 0.9; hccl's 64 MiB algorithm bandwidth
within 3x of memcpy."""

import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORLDS = (2, 4, 8)
SIZES_MIB = (1 / 16, 1, 16, 64)
BARS = {"all_reduce 64 MiB": 0.4, "DDP step": 0.9, "memcpy / bandwidth at 64 MiB": 3.0}


def worker():
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torch_npu  # noqa: F401

    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)
    dist.init_process_group("hccl")
    gloo = dist.new_group(backend="gloo")

    def timed(fn, repeats):
        dist.barrier(group=gloo)
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        dist.barrier(group=gloo)
        return (time.perf_counter() - start) / repeats

    def cnn():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 10)
        )

    result = {"all_reduce": {}}
    for mib in SIZES_MIB:
        numel = int(mib * 2**18)  # float32
        npu_buf, cpu_buf = torch.ones(numel, device="npu"), torch.ones(numel)
        repeats = max(3, int(8 / mib)) if mib < 8 else 3
        for _ in range(2):  # warm-up
            dist.all_reduce(npu_buf), dist.all_reduce(cpu_buf, group=gloo)
        hccl, gloo_t = [], []
        for _ in range(5):
            hccl.append(timed(lambda b=npu_buf: dist.all_reduce(b), repeats))
            gloo_t.append(timed(lambda b=cpu_buf: dist.all_reduce(b, group=gloo), repeats))
        h, g = statistics.median(hccl), statistics.median(gloo_t)
        result["all_reduce"][f"{mib:g} MiB"] = {
            "hccl_ms": h * 1e3,
            "gloo_ms": g * 1e3,
            "ratio": statistics.median(a / b for a, b in zip(hccl, gloo_t)),
            "hccl_GiBps": mib / 1024 / h,
            "gloo_GiBps": mib / 1024 / g,
        }
    npu_model = DDP(cnn().npu(), device_ids=[0])
    cpu_model = DDP(cnn(), process_group=gloo)
    x_npu, x_cpu = torch.randn(8, 3, 16, 16, device="npu"), torch.randn(8, 3, 16, 16)

    def step(model, x):
        model(x).sum().backward()

    for _ in range(2):
        step(npu_model, x_npu), step(cpu_model, x_cpu)
    ddp = [timed(lambda: step(npu_model, x_npu), 10) / timed(lambda: step(cpu_model, x_cpu), 10) for _ in range(5)]
    result["DDP step"] = statistics.median(ddp)
    if rank == 0:
        print(json.dumps(result))
    dist.destroy_process_group()


def memcpy_GiBps():
    import torch

    torch.set_num_threads(1)
    src = torch.ones(16 * 2**20)
    dst = torch.empty_like(src)
    times = []
    for _ in range(15):
        start = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - start)
    return 64 / 1024 / statistics.median(times[3:])


def run(world):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__],
            stdout=subprocess.PIPE,
            text=True,
            env=dict(
                os.environ,
                RANK=str(r),
                WORLD_SIZE=str(world),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
                OMP_NUM_THREADS="1",
                VNPU_OPS_PROFILE="none",
            ),
        )
        for r in range(world)
    ]
    outputs = [p.communicate(timeout=1800)[0] for p in procs]
    return json.loads(outputs[0].strip().splitlines()[-1])


def main():
    if os.environ.get("RANK") is not None:
        return worker()
    memcpy = memcpy_GiBps()
    worlds = {}
    for world in WORLDS:
        worlds[str(world)] = found = run(world)
        for size, row in found["all_reduce"].items():
            print(
                f"{world} ranks all_reduce {size:>8s}: hccl {row['hccl_ms']:8.2f} ms ({row['hccl_GiBps']:.2f} GiB/s)"
                f"  gloo {row['gloo_ms']:8.2f} ms ({row['gloo_GiBps']:.2f} GiB/s)  ratio {row['ratio']:.3f}"
            )
        print(f"{world} ranks DDP step hccl / gloo: {found['DDP step']:.3f}")
    four = worlds["4"]
    ratios = {
        "all_reduce 64 MiB": four["all_reduce"]["64 MiB"]["ratio"],
        "DDP step": four["DDP step"],
        "memcpy / bandwidth at 64 MiB": memcpy / four["all_reduce"]["64 MiB"]["hccl_GiBps"],
    }
    print(f"memcpy {memcpy:.2f} GiB/s (one process)")
    for name, ratio in ratios.items():
        print(f"{name:30s} 4 ranks: {ratio:.3f} (bar <= {BARS[name]})")
    with open(os.path.join(HERE, "results", "distributed.json"), "w") as f:
        json.dump({"ranks": 4, "ratios": ratios, "bars": BARS, "memcpy_GiBps": memcpy, "worlds": worlds}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
