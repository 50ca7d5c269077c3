"""Deterministic computation controls of torch_npu.

vnpu runs PyTorch's CPU kernels, which are deterministic for a given input except where PyTorch
documents otherwise; these controls set PyTorch's own switches accordingly. Level 2 (CANN's strong
consistency) also makes a matmul row's result independent of the row's position and of how many rows
share the call, as on the card."""

import warnings

import torch

from torch_npu import _C

__all__ = ["set_deterministic_level", "enable_deterministic_with_backward", "disable_deterministic_with_backward"]

_level = 0

_CONFLICT = (
    "The current configuration value of 'torch_npu.npu.set_deterministic_level' conflicts with "
    "'torch.use_deterministic_algorithms'. 'torch.use_deterministic_algorithms' has been configured to '{}'"
)


def set_deterministic_level(level: int) -> None:
    """0: off; 1: deterministic kernels (torch.use_deterministic_algorithms(True));
    2: strong consistency, also the same result for the same data wherever it sits (mm(a[:1], b) equals
    mm(a, b)[:1] bit for bit; mm, addmm, bmm and baddbmm run in blocks of a fixed row count, slower).

    As in torch_npu, the level drives PyTorch's switch (with a warning when they disagree)."""
    global _level
    if level not in (0, 1, 2):
        raise ValueError(f"deterministic level must be 0, 1 or 2, but got {level}")
    warnings.warn(
        "After using 'torch_npu.npu.set_deterministic_level', please do not use "
        "'torch.use_deterministic_algorithms' anymore, as it may cause unknown errors."
    )
    enabled = torch.are_deterministic_algorithms_enabled()
    if enabled != (level > 0):
        warnings.warn(_CONFLICT.format(level > 0))
        torch.use_deterministic_algorithms(level > 0)
    _level = level
    _C._set_strong_consistency(level == 2)


def get_deterministic_level():
    return _level


def _get_deterministic_level():
    """The level in force: follows torch.use_deterministic_algorithms when it was changed since
    (0 becomes 1 when PyTorch's switch is on, any level becomes 0 when it is off)."""
    enabled = torch.are_deterministic_algorithms_enabled()
    if (_level > 0) != enabled:
        set_deterministic_level(1 if enabled else 0)
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
