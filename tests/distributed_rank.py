"""What every case of a multi-process hccl test shares: this rank's identity and its exact checks."""

import os

import torch

RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
DEV = torch.device("npu", 0)


def data(rank, n=6, dtype=torch.float32):
    return (torch.arange(n, dtype=torch.float64) * (rank + 1) + rank - 2.5).to(dtype)


def same(got, want):
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want), (got, want)
