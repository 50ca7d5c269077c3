"""The cases of tests/distributed_worker.py that profile collectives for Ascend's analysis tools: each rank writes
its profile under PROFILE_DIR, which the test then reads with msprof-analyze."""

import os
import time

import torch
import torch.distributed as dist
from distributed_rank import DEV, RANK, WORLD

import torch_npu


def _one_profiled_step(export_type):
    """A profiler recording one step of CPU and NPU activity into PROFILE_DIR, exported as export_type."""
    return torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=1, repeat=1),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(os.environ["PROFILE_DIR"]),
        experimental_config=torch_npu.profiler._ExperimentalConfig(export_type=export_type),
    )


def case_profiled_collectives():
    """A profiled step with one all_reduce of 4096 float32 (16 KiB) and a 1 KiB send from rank 0 to rank 1,
    written under PROFILE_DIR (as PROFILE_EXPORT: text or db) for msprof-analyze."""
    with _one_profiled_step(os.environ.get("PROFILE_EXPORT", "text")) as prof:
        x = torch.randn(64, 64).to(DEV)  # a host-to-device copy
        t = (x @ x).reshape(-1)
        dist.all_reduce(t)
        message = torch.ones(256, device=DEV)
        if RANK == 0:
            dist.send(message, dst=1)
        elif RANK == 1:
            dist.recv(message, src=0)
        prof.step()
    print("ok")


def case_profiled_database():
    """A matmul and six all_reduces the last rank joins 200 ms late (far above scheduling noise on a loaded
    machine), profiled into PROFILE_DIR as databases."""
    with _one_profiled_step("db") as prof:
        x = torch.randn(32, 32).to(DEV)
        x = x @ x
        for _ in range(6):
            if RANK == WORLD - 1:
                time.sleep(0.2)
            dist.all_reduce(torch.ones(4096).to(DEV))
        prof.step()
    print("ok")
