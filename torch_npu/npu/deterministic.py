"""Deterministic computation controls of torch_npu.

vnpu runs PyTorch's CPU kernels, which are deterministic for a given input except where PyTorch
documents otherwise; these controls set PyTorch's own switches accordingly."""

import warnings

import torch

__all__ = ["set_deterministic_level", "enable_deterministic_with_backward", "disable_deterministic_with_backward"]

_level = 0


def set_deterministic_level(level: int) -> None:
    """0: off; 1: deterministic kernels (torch.use_deterministic_algorithms(True));
    2: also deterministic communication (HCCL_DETERMINISTIC)."""
    global _level
    if level not in (0, 1, 2):
        raise ValueError(f"deterministic level must be 0, 1 or 2, but got {level}")
    if level and not torch.are_deterministic_algorithms_enabled():
        warnings.warn("set_deterministic_level also turns on torch.use_deterministic_algorithms(True).")
    torch.use_deterministic_algorithms(level > 0)
    _level = level


def get_deterministic_level():
    return _level


class _DeterministicBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, enable):
        ctx.enable = enable
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        # Reached first in backward (the marked tensor is the last forward output used): switch
        # PyTorch's deterministic mode for the rest of the backward pass.
        torch.use_deterministic_algorithms(ctx.enable)
        return grad, None


def enable_deterministic_with_backward(tensor: torch.Tensor) -> torch.Tensor:
    """Compute the forward from here on, and the matching backward, deterministically."""
    torch.use_deterministic_algorithms(True)
    return _DeterministicBackward.apply(tensor, True)


def disable_deterministic_with_backward(tensor: torch.Tensor) -> torch.Tensor:
    """Leave deterministic computation from here on (and in the matching backward)."""
    torch.use_deterministic_algorithms(False)
    return _DeterministicBackward.apply(tensor, False)
