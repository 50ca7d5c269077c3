"""npu_attn_softmax_ / npu_attn_softmax_backward_: the attention-score softmax over the last dim done in place,
and its backward written into the same buffer (the card saves the [B, Sq, Skv] memory a second tensor costs).

    npu_attn_softmax_(x):                    x <- softmax(x, -1)
    npu_attn_softmax_backward_(p, dy, v):    p <- p * (dp - sum(dp * p, -1)),  dp = dy @ v^T

where p is the softmax output, dy the gradient of out = p @ v ([..., Sq, H]) and v the values ([..., Skv, H]).
Computed in float32 and rounded once to the buffer's dtype.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.functionalization import functionalized_by
from torch_npu.ops.registration import npu_op

__all__ = []


def _softmax(x):
    return torch.softmax(x.float(), -1).to(x.dtype)


def _softmax_grad(probs, grad_output, values):
    op = "npu_attn_softmax_backward_"
    check(
        grad_output.shape[:-1] == probs.shape[:-1] and values.shape[-2] == probs.shape[-1],
        op,
        f"grad_output {tuple(grad_output.shape)} and values {tuple(values.shape)} do not fit self {tuple(probs.shape)}",
    )
    p = probs.float()
    dp = grad_output.float() @ values.float().transpose(-1, -2)
    return (p * (dp - (dp * p).sum(-1, keepdim=True))).to(probs.dtype)


@npu_op("npu_attn_softmax_(Tensor(a!) self) -> Tensor(a!)")
def npu_attn_softmax_(x):
    """softmax over the last dim, in place."""
    return x.copy_(_softmax(x))


@npu_op("npu_attn_softmax_backward_(Tensor(a!) self, Tensor grad_output, Tensor values) -> Tensor(a!)")
def npu_attn_softmax_backward_(x, grad_output, values):
    """The gradient of the softmax input, written over the softmax output in self."""
    return x.copy_(_softmax_grad(x, grad_output, values))


functionalized_by("npu_attn_softmax_", _softmax)
functionalized_by("npu_attn_softmax_backward_", _softmax_grad)
