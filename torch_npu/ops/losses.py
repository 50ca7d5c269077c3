"""Losses under torch_npu's names: npu_softmax_cross_entropy_with_logits."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dtype_support import FLOATS
from torch_npu.ops.registration import npu_op

__all__ = []


@npu_op(
    "npu_softmax_cross_entropy_with_logits(Tensor self, Tensor labels) -> Tensor",
    differentiable=True,
    dtypes={"self": FLOATS, "labels": FLOATS},
    api="aclnnSoftmaxCrossEntropyWithLogits",
)
def npu_softmax_cross_entropy_with_logits(logits, labels):
    """Per row of [N, C] logits: -sum(labels * log_softmax(logits)), a [N] loss (labels are a distribution)."""
    op = "npu_softmax_cross_entropy_with_logits"
    check(logits.dim() == 2, op, f"self must be 2-D [N, C], got {logits.dim()}-D")
    check(
        labels.shape == logits.shape,
        op,
        f"labels must have the shape of self {tuple(logits.shape)}, got {tuple(labels.shape)}",
    )
    return -(labels * torch.log_softmax(logits, dim=-1)).sum(dim=-1)
