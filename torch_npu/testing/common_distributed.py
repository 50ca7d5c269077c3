"""Helpers of torch_npu's distributed tests: process groups for MultiProcessTestCase / DTensorTestBase tests
(`with_comms`, `init_pg`), device-count skips, and the per-rank setup of distributed Dynamo tests."""

import os
import unittest
from collections import namedtuple
from contextlib import contextmanager
from functools import wraps

import torch
import torch.distributed as dist

__all__ = ["TEST_SKIPS", "TestSkip", "init_pg", "skipIfUnsupportMultiNPU", "with_comms"]

TestSkip = namedtuple("TestSkip", "exit_code, message")

TEST_SKIPS = {
    "multi-npu": TestSkip(75, "Multi-NPU condition not satisfied"),
    **{f"multi-npu-{n}": TestSkip(75, f"Need at least {n} ASCEND devices") for n in range(1, 9)},
    "hccl": TestSkip(76, "c10d not compiled with HCCL support"),
    "known_issues": TestSkip(77, "Test skipped due to known issues"),
}


def _check_npus(backend, world_size):
    if backend == "hccl" and torch.npu.device_count() < world_size:
        raise RuntimeError(TEST_SKIPS[f"multi-npu-{world_size}"].message)


def init_pg(backend: str = "hccl", world_size=1, rank=0, file_name="file://") -> None:
    """Initialise the default process group (hccl or gloo) from the file store at path file_name; hccl ranks then
    use the npu of their rank."""
    _check_npus(backend, world_size)
    if backend not in ("hccl", "gloo"):
        raise RuntimeError(f"Backend {backend} not supported!")
    dist.init_process_group(backend=backend, world_size=world_size, rank=rank, init_method=f"file://{file_name}")
    if backend == "hccl":
        torch.npu.set_device(rank)


def skipIfUnsupportMultiNPU(npu_number_needed):
    """Skip the test unless npu is available with at least npu_number_needed devices."""

    def decorator(func):
        @wraps(func)
        def wrapper(self, *args, **kwargs):
            if not torch.npu.is_available() or torch.npu.device_count() < npu_number_needed:
                raise unittest.SkipTest(f"Multi-NPU {npu_number_needed} condition not satisfied")
            return func(self, *args, **kwargs)

        return wrapper

    return decorator


def with_comms(func):
    """Run a MultiProcessTestCase / DTensorTestBase method inside a process group: hccl on npu when there are
    world_size devices (self.device_type = "npu"), gloo on the CPU otherwise; the store is self.file_name; the npu
    generator is seeded with 0; self.destroy_pg() ends it."""
    if func is None:
        raise RuntimeError("Test function is None.")

    @wraps(func)
    def wrapper(self, *args, **kwargs):
        enough = torch.npu.is_available() and torch.npu.device_count() >= self.world_size
        if not isinstance(getattr(type(self), "device_type", None), property):  # PyTorch's DTensorTestBase
            self.device_type = "npu" if enough else "cpu"  # computes it itself (a read-only property)
        backend = "hccl" if self.device_type == "npu" else "gloo"
        init_pg(backend=backend, world_size=self.world_size, rank=self.rank, file_name=self.file_name)
        torch.npu.manual_seed(0)
        torch.npu.initial_seed()
        func(self, *args, **kwargs)
        self.destroy_pg()

    return wrapper


@contextmanager
def _dynamo_dist_per_rank_init(rank, world_size, init_pg_=True):
    """One rank of a distributed Dynamo test: its npu, an hccl group over localhost (when init_pg_), and Dynamo's
    caches and counters reset before and after."""
    torch.npu.set_device(rank)
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "6789"
    if init_pg_:
        dist.init_process_group(backend="hccl", rank=rank, world_size=world_size)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    try:
        yield
    finally:
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        if init_pg_:
            dist.destroy_process_group()
