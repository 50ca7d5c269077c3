"""hccl on npu against raw gloo on CPU tensors, 4 ranks on this machine, in the same processes:
all_reduce of 64 MiB, and a DDP training step of a small CNN. Medians of repeated alternating runs.
Writes bench/results/distributed.json. Bars: <= 1.10 each."""

import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BAR = 1.10
RANKS = 4


def worker():
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torch_npu  # noqa: F401

    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)
    dist.init_process_group("hccl")
    gloo = dist.new_group(backend="gloo")
    npu_buf = torch.ones(16 * 2**20, device="npu")  # 64 MiB of float32
    cpu_buf = torch.ones(16 * 2**20)

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

    npu_model = DDP(cnn().npu(), device_ids=[0])
    cpu_model = DDP(cnn(), process_group=gloo)
    x_npu, x_cpu = torch.randn(8, 3, 16, 16, device="npu"), torch.randn(8, 3, 16, 16)

    def step(model, x):
        model(x).sum().backward()

    rows = {"all_reduce 64 MiB": [], "DDP step": []}
    for _ in range(2):  # warm-up
        dist.all_reduce(npu_buf), dist.all_reduce(cpu_buf, group=gloo), step(npu_model, x_npu), step(cpu_model, x_cpu)
    for _ in range(5):
        rows["all_reduce 64 MiB"].append(
            timed(lambda: dist.all_reduce(npu_buf), 3) / timed(lambda: dist.all_reduce(cpu_buf, group=gloo), 3)
        )
        rows["DDP step"].append(timed(lambda: step(npu_model, x_npu), 10) / timed(lambda: step(cpu_model, x_cpu), 10))
    if rank == 0:
        print(json.dumps({k: statistics.median(v) for k, v in rows.items()}))
    dist.destroy_process_group()


def main():
    if os.environ.get("RANK") is not None:
        return worker()
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
                WORLD_SIZE=str(RANKS),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
                OMP_NUM_THREADS="1",
                VNPU_OPS_PROFILE="none",
            ),
        )
        for r in range(RANKS)
    ]
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    ratios = json.loads(outputs[0].strip().splitlines()[-1])
    for name, ratio in ratios.items():
        print(f"{name:20s} hccl on npu / gloo on cpu, {RANKS} ranks: {ratio:.3f} (bar <= {BAR})")
    with open(os.path.join(HERE, "results", "distributed.json"), "w") as f:
        json.dump({"ranks": RANKS, "ratios": ratios, "bar": BAR}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
