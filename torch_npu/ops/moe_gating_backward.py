"""npu_moe_gating_top_k_backward: the gradient of npu_moe_gating_top_k's routing weights with respect to its
logits x, from the normalised scores x_norm (softmax for norm_type 0, sigmoid for 1; the forward's third output
with out_flag) and the chosen experts.

weights_j = r * s[idx_j] (softmax), or r * s[idx_j] / (sum_k s[idx_k] + eps) (sigmoid); the gradient flows to
the chosen scores and then through the softmax (s * (g - sum(g * s))) or the sigmoid (s * (1 - s))."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []


@npu_op(
    "npu_moe_gating_top_k_backward(Tensor x_norm, Tensor grad_y, Tensor expertIdx, *, int renorm=0, "
    "int norm_type=0, float routed_scaling_factor=1.0, float eps=1e-20) -> Tensor"
)
def npu_moe_gating_top_k_backward(
    x_norm, grad_y, expert_idx, *, renorm=0, norm_type=0, routed_scaling_factor=1.0, eps=1e-20
):
    op = "npu_moe_gating_top_k_backward"
    check(x_norm.dim() == 2, op, f"x_norm must be 2-D [tokens, experts], got {x_norm.dim()}-D")
    check(
        grad_y.shape == expert_idx.shape and grad_y.shape[0] == x_norm.shape[0],
        op,
        f"grad_y and expertIdx must both be [tokens={x_norm.shape[0]}, k], got {tuple(grad_y.shape)} and "
        f"{tuple(expert_idx.shape)}",
    )
    check(renorm == 0, op, f"renorm must be 0 (the forward's normalisation), got {renorm}")
    check(norm_type in (0, 1), op, f"norm_type must be 0 (softmax) or 1 (sigmoid), got {norm_type}")
    scores, grad = x_norm.float(), grad_y.float() * routed_scaling_factor
    idx = expert_idx.long()
    chosen = scores.gather(1, idx)
    if norm_type == 1:
        total = chosen.sum(-1, keepdim=True) + eps
        grad = grad / total - (grad * chosen).sum(-1, keepdim=True) / (total * total)
    grad_scores = torch.zeros_like(scores).scatter_add_(1, idx, grad)
    if norm_type == 0:
        grad_x = scores * (grad_scores - (grad_scores * scores).sum(-1, keepdim=True))
    else:
        grad_x = grad_scores * scores * (1 - scores)
    return grad_x.to(grad_y.dtype)
