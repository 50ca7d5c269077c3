"""Activations of torch_npu's contrib: Mish, SiLU and its alias Swish (same values as PyTorch's)."""

import torch.nn.functional as F
from torch import nn

__all__ = ["Mish", "SiLU", "Swish"]


class Mish(nn.Module):
    """x * tanh(softplus(x))."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.mish(x)


class SiLU(nn.Module):
    """x * sigmoid(x)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.silu(x)


class Swish(SiLU):
    """Another name of SiLU: x * sigmoid(x)."""

    def __init__(self):
        super().__init__()
