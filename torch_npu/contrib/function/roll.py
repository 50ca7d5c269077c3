"""roll: torch.roll, which torch_npu implements with index_select on the NPU."""

import torch

__all__ = ["roll"]


def roll(x, shifts, dims):
    return torch.roll(x, shifts, dims)
