"""npu_mhc_sinkhorn / npu_mhc_sinkhorn_backward: Sinkhorn normalisation of mHC's residual mixing matrices
(MhcSinkhorn), x [T, n, n] or [B, S, n, n] float32 -> doubly stochastic y:

    norm[0] = softmax(x, -1) + eps;   sum[1] = colsum(norm[0]) + eps;  norm[1] = norm[0] / sum[1]
    i = 1 .. num_iters - 1:  sum[2i] = rowsum(norm[2i-1]) + eps;  norm[2i] = norm[2i-1] / sum[2i]
                             sum[2i+1] = colsum(norm[2i]) + eps;  norm[2i+1] = norm[2i] / sum[2i+1]
    y = norm[2 num_iters - 1]

With out_flag 1 the intermediates are returned in the card's layout, tokens last: norm [2 num_iters, n, n, ..]
and sum [2 num_iters, n, ..] (sum[0], the softmax's own denominator, holds the row sums of exp(x - rowmax));
with out_flag 0 both are empty. The backward replays the steps from norm and sum; npu_mhc_sinkhorn is
differentiable through it (out_flag 1 is needed for that).
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_mhc_sinkhorn"


def _tokens_last(t, lead):
    return t.permute(0, *range(len(lead) + 1, t.dim()), *range(1, len(lead) + 1)).contiguous()


def _tokens_first(t, lead_dims):
    return t.permute(0, *range(t.dim() - lead_dims, t.dim()), *range(1, t.dim() - lead_dims))


def _fake(x, *, eps=1e-6, num_iters=20, out_flag=0):
    lead, n = x.shape[:-2], x.shape[-1]
    if not out_flag:
        return torch.empty_like(x), x.new_empty(0), x.new_empty(0)
    return torch.empty_like(x), x.new_empty(2 * num_iters, n, n, *lead), x.new_empty(2 * num_iters, n, *lead)


def _setup(ctx, inputs, output, keyword_only_inputs=None):
    ctx.out_flag = (keyword_only_inputs or {}).get("out_flag", 0)
    ctx.save_for_backward(output[1], output[2])


def _backward(ctx, grad_y, *unused):
    check(ctx.out_flag == 1, _OP, "the backward needs norm and sum: call with out_flag=1")
    norm, sums = ctx.saved_tensors
    return torch.ops.npu.npu_mhc_sinkhorn_backward(grad_y, norm, sums)


@npu_op(
    "npu_mhc_sinkhorn(Tensor x, *, float eps=1e-6, SymInt num_iters=20, int out_flag=0) -> (Tensor, Tensor, Tensor)",
    fake=_fake,
    backward=_backward,
    setup_context=_setup,
)
def npu_mhc_sinkhorn(x, *, eps=1e-6, num_iters=20, out_flag=0):
    """(y, norm, sum)."""
    check(x.dim() in (3, 4) and x.shape[-1] == x.shape[-2], _OP, f"x must be [T, n, n] or [B, S, n, n], got {tuple(x.shape)}")  # fmt: skip
    check(x.dtype == torch.float32, _OP, f"x must be float32, got {x.dtype}")
    check(1 <= num_iters <= 100, _OP, f"num_iters must be in [1, 100], got {num_iters}")
    check(out_flag in (0, 1), _OP, f"out_flag must be 0 or 1, got {out_flag}")
    lead = x.shape[:-2]
    shifted = torch.exp(x - x.amax(-1, keepdim=True))
    first_sum = shifted.sum(-1)
    current = shifted / first_sum[..., None] + eps
    norms, sums = [current], [first_sum]
    for step in range(1, 2 * num_iters):
        dim = -2 if step % 2 else -1  # odd steps normalise columns, even steps rows
        total = current.sum(dim, keepdim=True) + eps
        current = current / total
        norms.append(current)
        sums.append(total.squeeze(dim))
    if not out_flag:
        return current, x.new_empty(0), x.new_empty(0)
    return current, _tokens_last(torch.stack(norms), lead), _tokens_last(torch.stack(sums), lead)


@npu_op("npu_mhc_sinkhorn_backward(Tensor grad_y, Tensor norm, Tensor sum) -> Tensor")
def npu_mhc_sinkhorn_backward(grad_y, norm, sum):  # noqa: A002 - op-plugin's argument name
    """grad of x, from the forward's norm and sum (out_flag 1)."""
    op = "npu_mhc_sinkhorn_backward"
    lead_dims = grad_y.dim() - 2
    check(norm.dim() == 3 + lead_dims and sum.dim() == 2 + lead_dims, op, "norm and sum must be the forward's out_flag=1 outputs")  # fmt: skip
    norms, sums = _tokens_first(norm, lead_dims), _tokens_first(sum, lead_dims)
    g = grad_y.float()
    for step in range(norms.shape[0] - 1, 0, -1):
        dim = -2 if step % 2 else -1
        y, total = norms[step], sums[step].unsqueeze(dim)
        g = (g - (g * y).sum(dim, keepdim=True)) / total
    # the softmax's Jacobian, its probabilities taken as norm[0] renormalised (eps is not among the arguments:
    # this differs from softmax(x) by about eps relatively)
    p = norms[0] / norms[0].sum(-1, keepdim=True)
    return p * (g - (g * p).sum(-1, keepdim=True))
