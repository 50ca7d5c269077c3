"""Vocabulary-parallel cross entropy in three operators (Megatron's fused vocab-parallel CE, split where the
ranks all-reduce): npu_fused_linear_online_max_sum, npu_fused_cross_entropy_loss_with_max_sum and
npu_fused_linear_cross_entropy_loss_with_max_sum_backward (FusedLinearOnlineMaxSum,
FusedCrossEntropyLossWithMaxSum, FusedLinearCrossEntropyLossGrad).

Forward, on each rank's vocabulary shard [vocab_start_index, vocab_end_index) of weight [V, H]:
    logits = input @ weight^T (float32 from float16 / bfloat16 operands); logits_max = max over V;
    sub = logits - logits_max; sum_exp_logits = sum(exp(sub)); target_mask = target outside the shard;
    masked_target = target - vocab_start_index (0 where masked); predicted_logits = sub[masked_target] (0 where
    masked); target_mask is returned packed eight to a uint8, the first token in the lowest bit, a partial last
    byte padded as token id 0 would be; the logits themselves (input's dtype) only with return_logits.
After the all-reduce: loss = log(sum_exp_logits) - predicted_logits, and with vocab_parallel_logits the
softmax exp(logits - logits_max) * (1 / sum_exp_logits), float32. Without them the second output is None.
Backward: grad_logits = softmax (given, or recomputed from input, weight, logits_max and sum_exp_logits) minus 1
at (b, masked_target[b]) for the unmasked tokens, times grad[b]; grad_input = grad_logits @ weight and
grad_weight = grad_logits^T @ input, in input's dtype. label_smoothing: only 0.0, as on the card.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.bit_masks import pack_bits, unpack_bits
from torch_npu.ops.registration import npu_op

__all__ = []

_FORWARD = "npu_fused_linear_online_max_sum"
_LOSS = "npu_fused_cross_entropy_loss_with_max_sum"
_BACKWARD = "npu_fused_linear_cross_entropy_loss_with_max_sum_backward"
_HALVES = (torch.float16, torch.bfloat16)


def _check_matmul(op, input, weight):
    check(
        input.dim() == 2 and weight.dim() == 2,
        op,
        f"input and weight must be 2-D, got {tuple(input.shape)} and {tuple(weight.shape)}",
    )
    check(
        input.dtype in _HALVES and weight.dtype == input.dtype,
        op,
        f"input and weight must both be float16 or bfloat16, got {input.dtype} and {weight.dtype}",
    )
    check(
        weight.shape[1] == input.shape[1],
        op,
        f"weight must be [V, H={input.shape[1]}], got {tuple(weight.shape)}",
    )


def _forward_fake(input, weight, target, vocab_start_index, vocab_end_index, return_logits=False):
    bt = input.shape[0]
    rows = input.new_empty(bt, dtype=torch.float32)
    logits = input.new_empty(bt, weight.shape[0]) if return_logits else None
    return (
        rows,
        torch.empty_like(rows),
        torch.empty_like(rows),
        input.new_empty((bt + 7) // 8, dtype=torch.uint8),
        torch.empty_like(target),
        logits,
    )


@npu_op(
    "npu_fused_linear_online_max_sum(Tensor input, Tensor weight, Tensor target, int vocab_start_index, "
    "int vocab_end_index, bool return_logits=False) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=_forward_fake,
    api="aclnnFusedLinearOnlineMaxSum",
)
def npu_fused_linear_online_max_sum(input, weight, target, vocab_start_index, vocab_end_index, return_logits=False):
    _check_matmul(_FORWARD, input, weight)
    check(
        target.dim() == 1 and target.dtype in (torch.int32, torch.int64) and target.shape[0] == input.shape[0],
        _FORWARD,
        f"target must be int32 or int64 [BT={input.shape[0]}], got {tuple(target.shape)} {target.dtype}",
    )
    check(vocab_start_index >= 0, _FORWARD, f"vocab_start_index must not be negative, got {vocab_start_index}")
    check(
        vocab_end_index >= vocab_start_index,
        _FORWARD,
        f"vocab_end_index {vocab_end_index} must not be smaller than vocab_start_index {vocab_start_index}",
    )
    logits = torch.matmul(input.float(), weight.float().t())
    if weight.shape[0]:
        logits_max = logits.max(dim=-1).values
    else:
        logits_max = logits.new_full((input.shape[0],), float("-inf"))
    sub = logits - logits_max.unsqueeze(-1)
    sum_exp = sub.exp().sum(dim=-1)
    masked = (target < vocab_start_index) | (target >= vocab_end_index)
    masked_target = torch.where(masked, torch.zeros_like(target), target - vocab_start_index)
    check(
        bool((masked_target[~masked] < weight.shape[0]).all()),
        _FORWARD,
        f"the shard [{vocab_start_index}, {vocab_end_index}) holds targets beyond weight's {weight.shape[0]} rows",
    )
    if weight.shape[0]:
        picked = sub.gather(1, masked_target.long().view(-1, 1)).view(-1)
    else:
        picked = torch.zeros_like(logits_max)
    predicted = torch.where(masked, torch.zeros_like(picked), picked)
    padding_masked = 0 < vocab_start_index or 0 >= vocab_end_index  # the padding tokens count as id 0
    out_logits = logits.to(input.dtype) if return_logits else None
    return logits_max, sum_exp, predicted, pack_bits(masked, padding_masked), masked_target, out_logits


def _loss_fake(logits_max, sum_exp_logits, predicted_logits, **kwargs):
    logits = kwargs.get("vocab_parallel_logits")
    softmax = logits.new_empty(logits.shape, dtype=torch.float32) if logits is not None else None
    return torch.empty_like(logits_max), softmax


@npu_op(
    "npu_fused_cross_entropy_loss_with_max_sum(Tensor logits_max, Tensor sum_exp_logits, Tensor predicted_logits, "
    "*, float? label_smoothing=0.0, Tensor? input=None, Tensor? weight=None, Tensor? vocab_parallel_logits=None) "
    "-> (Tensor, Tensor)",
    fake=_loss_fake,
    api="aclnnFusedCrossEntropyLossWithMaxSum",
)
def npu_fused_cross_entropy_loss_with_max_sum(
    logits_max,
    sum_exp_logits,
    predicted_logits,
    *,
    label_smoothing=0.0,
    input=None,
    weight=None,
    vocab_parallel_logits=None,
):
    check(not label_smoothing, _LOSS, f"label_smoothing only supports 0.0, got {label_smoothing}")
    check(input is None and weight is None, _LOSS, "input and weight only support None")
    for name, t in (
        ("logits_max", logits_max),
        ("sum_exp_logits", sum_exp_logits),
        ("predicted_logits", predicted_logits),
    ):
        check(
            t.dim() == 1 and t.dtype == torch.float32 and t.shape == logits_max.shape,
            _LOSS,
            f"{name} must be float32 [{logits_max.shape[0]}], got {tuple(t.shape)} {t.dtype}",
        )
    loss = sum_exp_logits.log() - predicted_logits
    if vocab_parallel_logits is None:
        return loss, None
    check(
        vocab_parallel_logits.dim() == 2 and vocab_parallel_logits.shape[0] == logits_max.shape[0],
        _LOSS,
        f"vocab_parallel_logits must be [{logits_max.shape[0]}, V], got {tuple(vocab_parallel_logits.shape)}",
    )
    shifted = vocab_parallel_logits.float() - logits_max.unsqueeze(-1)
    return loss, shifted.exp() * sum_exp_logits.reciprocal().unsqueeze(-1)


def _backward_fake(grad, input, weight, target_mask, masked_target, label_smoothing=0.0, **kwargs):
    return torch.empty_like(input), torch.empty_like(weight)


@npu_op(
    "npu_fused_linear_cross_entropy_loss_with_max_sum_backward(Tensor grad, Tensor input, Tensor weight, "
    "Tensor target_mask, Tensor masked_target, float label_smoothing=0.0, Tensor? logits_max=None, "
    "Tensor? sum_exp_logits=None, Tensor? softmax=None) -> (Tensor, Tensor)",
    fake=_backward_fake,
    api="aclnnFusedLinearCrossEntropyLossGrad",
)
def npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
    grad,
    input,
    weight,
    target_mask,
    masked_target,
    label_smoothing=0.0,
    logits_max=None,
    sum_exp_logits=None,
    softmax=None,
):
    _check_matmul(_BACKWARD, input, weight)
    bt, vocab = input.shape[0], weight.shape[0]
    check(not label_smoothing, _BACKWARD, f"label_smoothing only supports 0.0, got {label_smoothing}")
    check(
        grad.dim() == 1 and grad.dtype == torch.float32 and grad.shape[0] == bt,
        _BACKWARD,
        f"grad must be float32 [BT={bt}], got {tuple(grad.shape)} {grad.dtype}",
    )
    check(
        target_mask.dtype == torch.uint8 and target_mask.numel() * 8 >= bt,
        _BACKWARD,
        f"target_mask must be uint8 holding {bt} bits, got {tuple(target_mask.shape)} {target_mask.dtype}",
    )
    check(
        masked_target.dim() == 1 and masked_target.shape[0] == bt,
        _BACKWARD,
        f"masked_target must be [BT={bt}], got {tuple(masked_target.shape)}",
    )
    if softmax is None:
        check(
            logits_max is not None and sum_exp_logits is not None,
            _BACKWARD,
            "without softmax, logits_max and sum_exp_logits are required",
        )
        logits = torch.matmul(input.float(), weight.float().t())
        grad_logits = (logits - logits_max.unsqueeze(-1)).exp() / sum_exp_logits.unsqueeze(-1)
    else:
        check(
            tuple(softmax.shape) == (bt, vocab) and softmax.dtype == torch.float32,
            _BACKWARD,
            f"softmax must be float32 [{bt}, {vocab}], got {tuple(softmax.shape)} {softmax.dtype}",
        )
        grad_logits = softmax.clone()
    check(
        bool(((masked_target >= 0) & (masked_target < vocab)).all()),
        _BACKWARD,
        f"masked_target must lie in [0, {vocab})",
    )
    keep = 1.0 - unpack_bits(target_mask, bt).to(torch.float32)
    rows = torch.arange(bt, device=grad.device)
    grad_logits[rows, masked_target.long()] -= keep
    grad_logits = grad_logits * grad.unsqueeze(-1)
    grad_input = torch.matmul(grad_logits, weight.float()).to(input.dtype)
    grad_weight = torch.matmul(grad_logits.t(), input.float()).to(input.dtype)
    return grad_input, grad_weight
