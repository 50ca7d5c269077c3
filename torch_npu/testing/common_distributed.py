"""Helpers of torch_npu's distributed tests."""

import functools
import os
from collections import namedtuple

import torch
import torch.distributed as dist

__all__ = ["TestSkip", "init_pg", "skipIfUnsupportMultiNPU", "with_comms", "TEST_SKIPS"]

TestSkip = namedtuple("TestSkip", "exit_code, message")

TEST_SKIPS = {
    "multi-npu": TestSkip(75, "Need at least 2 NPU devices"),
    "skipIfUnsupportMultiNPU": TestSkip(76, "Not enough NPU devices for this test"),
}


def init_pg(backend: str = "hccl", world_size=1, rank=0, file_name="file://") -> None:
    """Initialise the default process group from a file store (file_name is a file:// URL)."""
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, init_method=file_name, world_size=world_size, rank=rank)
    if backend in ("hccl", "lccl"):
        torch.npu.set_device(rank % max(torch.npu.device_count(), 1))


def skipIfUnsupportMultiNPU(npu_number_needed):
    """Skip the test unless at least npu_number_needed devices are visible."""

    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if torch.npu.device_count() < npu_number_needed:
                import unittest

                raise unittest.SkipTest(
                    f"{TEST_SKIPS['skipIfUnsupportMultiNPU'].message}: needs "
                    f"{npu_number_needed}, found {torch.npu.device_count()}"
                )
            return func(*args, **kwargs)

        return wrapper

    return decorator


def with_comms(func):
    """Run the test method inside a process group (self.backend, self.world_size, self.rank,
    self.file_name; defaults hccl / 1 / 0 / a temp file) and destroy it afterwards."""

    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        import tempfile

        file_name = getattr(self, "file_name", None) or "file://" + tempfile.mktemp(prefix="vnpu_pg_")
        init_pg(getattr(self, "backend", "hccl"), getattr(self, "world_size", 1), getattr(self, "rank", 0), file_name)
        try:
            return func(self, *args, **kwargs)
        finally:
            dist.destroy_process_group()
            path = file_name[len("file://") :]
            if os.path.exists(path):
                os.remove(path)

    return wrapper
