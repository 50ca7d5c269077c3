"""Dropout with a byte mask (one uint8 per element, 1 = kept): _dropout_with_byte_mask returns (result, mask),
its backward reuses the mask, and dropout_with_byte_mask(self, p, train) is the module-level form that
torch_npu.contrib's DropoutWithByteMask calls.

The mask is drawn as ATen's CPU dropout draws its noise (bernoulli(1 - p) over the input's shape from the
device's generator), so with the same seed the result equals F.dropout on the CPU bit for bit.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dtype_support import FLOATS
from torch_npu.ops.registration import _export, _library, npu_op

__all__ = []


def _scaled(x, mask, p):
    if p == 1.0:
        return x * torch.zeros_like(x)
    return x * mask.to(x.dtype).div(1.0 - p)


def _setup(ctx, inputs, output):
    ctx.p = inputs[1]
    ctx.save_for_backward(output[1])


def _backward(ctx, grad, _grad_mask):
    (mask,) = ctx.saved_tensors
    return torch.ops.npu._dropout_with_byte_mask_backward(grad, mask, ctx.p), None


@npu_op(
    "_dropout_with_byte_mask(Tensor self, float p) -> (Tensor, Tensor)",
    fake=lambda x, p: (torch.empty_like(x), torch.empty_like(x, dtype=torch.uint8)),
    **dict(dtypes={"self": FLOATS}, api="DropOutDoMaskV3", backward=_backward, setup_context=_setup),
)
def _dropout_with_byte_mask(x, p):
    """(self * mask / (1 - p), mask) with a fresh byte mask."""
    check(0.0 <= p <= 1.0, "_dropout_with_byte_mask", f"p must be in [0, 1], got {p}")
    noise = torch.empty_like(x).bernoulli_(1.0 - p)
    return _scaled(x, noise, p), noise.to(torch.uint8)


@npu_op("_dropout_with_byte_mask_backward(Tensor grad_output, Tensor mask, float p) -> Tensor")
def _dropout_with_byte_mask_backward(grad_output, mask, p):
    """grad * mask / (1 - p)."""
    op = "_dropout_with_byte_mask_backward"
    check(mask.shape == grad_output.shape, op, f"mask {tuple(mask.shape)} must have grad_output's shape {tuple(grad_output.shape)}")  # fmt: skip
    return _scaled(grad_output, mask, p)


def dropout_with_byte_mask(x, p, train):
    """Dropout in training (with p > 0), the input itself otherwise; differentiable through the byte mask."""
    check(0.0 <= p <= 1.0, "dropout_with_byte_mask", f"p must be in [0, 1], got {p}")
    if not train or p == 0.0:
        return x.clone()
    return torch.ops.npu._dropout_with_byte_mask(x, p)[0]


# Composite: autograd flows through _dropout_with_byte_mask and its backward.
_library("npu").define("dropout_with_byte_mask(Tensor self, float p, bool train) -> Tensor")
_library("npu").impl("dropout_with_byte_mask", dropout_with_byte_mask, "CompositeImplicitAutograd")
_export("dropout_with_byte_mask")
