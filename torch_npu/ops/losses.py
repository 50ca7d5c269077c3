"""Losses under torch_npu's names: npu_softmax_cross_entropy_with_logits, npu_cross_entropy_loss."""

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


@npu_op(
    "npu_cross_entropy_loss(Tensor input, Tensor target, Tensor? weight=None, str reduction='mean', "
    "int ignore_index=-100, float label_smoothing=0.0, float lse_square_scale_for_zloss=0.0, "
    "bool return_zloss=False) -> (Tensor, Tensor, Tensor, Tensor)",
    differentiable=True,
    dtypes={"input": FLOATS},
    api="aclnnCrossEntropyLoss",
)
def npu_cross_entropy_loss(
    logits,
    target,
    weight=None,
    reduction="mean",
    ignore_index=-100,
    label_smoothing=0.0,
    lse_square_scale_for_zloss=0.0,
    return_zloss=False,
):
    """log_softmax and nll_loss fused (aclnnCrossEntropyLoss): (loss, log_prob, zloss, lse_for_zloss). loss is
    [N] for reduction 'none', else [1]; log_prob = input - logsumexp(input) in the input's dtype, the sums in
    fp32. zloss is not supported by torch_npu either (both stay empty)."""
    op = "npu_cross_entropy_loss"
    check(logits.dim() == 2, op, f"input must be 2-D [N, C], got {logits.dim()}-D")
    check(
        target.dim() == 1 and target.shape[0] == logits.shape[0],
        op,
        f"target must be [N] with N={logits.shape[0]}, got {tuple(target.shape)}",
    )
    check(target.dtype == torch.int64, op, f"target must be int64, got {target.dtype}")
    check(reduction in ("mean", "sum", "none"), op, f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    check(0.0 <= label_smoothing < 1.0, op, f"label_smoothing must be in [0.0, 1.0), got {label_smoothing}")
    check(
        lse_square_scale_for_zloss == 0.0 and not return_zloss,
        op,
        "lse_square_scale_for_zloss and return_zloss (zloss) are not supported, as on torch_npu",
    )
    log_prob = torch.log_softmax(logits.float(), dim=-1)
    loss = (
        torch.nn.functional.nll_loss(
            log_prob,
            target,
            weight=None if weight is None else weight.detach().float(),
            reduction=reduction,
            ignore_index=ignore_index,
        )
        if label_smoothing == 0.0
        else torch.nn.functional.cross_entropy(
            logits.float(),
            target,
            weight=None if weight is None else weight.detach().float(),
            reduction=reduction,
            ignore_index=ignore_index,
            label_smoothing=label_smoothing,
        )
    )
    if reduction != "none":
        loss = loss.reshape(1)
    empty = logits.new_empty(0)
    return loss.to(logits.dtype), log_prob.to(logits.dtype), empty, empty.clone()
