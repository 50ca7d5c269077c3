"""npu_mhc_post / npu_mhc_post_backward: the output mapping of manifold-constrained hyper-connections (mHC).

    y[t, j] = sum_i h_res[t, i, j] * x[t, i] + h_post[t, j] * h_out[t]        (y = h_res^T x + h_out (x) h_post)
    without h_res:  y = x + h_out (x) h_post

x [T, n, D] or [B, S, n, D] (float16 / bfloat16), h_res [.., n, n] and h_post [.., n] float32, h_out [.., D]
in x's dtype; computed in float32, y in x's dtype. The backward returns (grad_x, grad_h_res, grad_h_out,
grad_h_post), each in its input's dtype (grad_h_res is empty without h_res); npu_mhc_post is differentiable
through it.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_mhc_post"


def _check(x, h_res, h_out, h_post, op=_OP):
    check(x.dim() in (3, 4), op, f"x must be [T, n, D] or [B, S, n, D], got {tuple(x.shape)}")
    check(x.dtype in (torch.float16, torch.bfloat16), op, f"x must be float16 or bfloat16, got {x.dtype}")
    lead, n, d = tuple(x.shape[:-2]), x.shape[-2], x.shape[-1]
    check(tuple(h_out.shape) == (*lead, d) and h_out.dtype == x.dtype, op,
          f"h_out must be {[*lead, d]} in x's dtype, got {list(h_out.shape)} {h_out.dtype}")  # fmt: skip
    check(tuple(h_post.shape) == (*lead, n) and h_post.dtype == torch.float32, op,
          f"h_post must be float32 {[*lead, n]}, got {list(h_post.shape)} {h_post.dtype}")  # fmt: skip
    if h_res is not None:
        check(tuple(h_res.shape) == (*lead, n, n) and h_res.dtype == torch.float32, op,
              f"h_res must be float32 {[*lead, n, n]}, got {list(h_res.shape)} {h_res.dtype}")  # fmt: skip


def _forward(x, h_res, h_out, h_post):
    xf = x.float()
    mixed = xf if h_res is None else h_res.transpose(-1, -2) @ xf
    return (mixed + h_post.unsqueeze(-1) * h_out.float().unsqueeze(-2)).to(x.dtype)


@npu_op(
    "npu_mhc_post_backward(Tensor grad_y, Tensor x, Tensor? h_res, Tensor h_out, Tensor h_post) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    fake=lambda grad_y, x, h_res, h_out, h_post: (
        torch.empty_like(x),
        torch.empty_like(h_res) if h_res is not None else x.new_empty(0, dtype=torch.float32),
        torch.empty_like(h_out),
        torch.empty_like(h_post),
    ),  # fmt: skip
)
def npu_mhc_post_backward(grad_y, x, h_res, h_out, h_post):
    """(grad_x, grad_h_res, grad_h_out, grad_h_post) of npu_mhc_post."""
    _check(x, h_res, h_out, h_post, "npu_mhc_post_backward")
    check(grad_y.shape == x.shape, "npu_mhc_post_backward", f"grad_y must have x's shape {tuple(x.shape)}")
    g = grad_y.float()
    grad_x = g if h_res is None else h_res @ g
    grad_h_res = x.new_empty(0, dtype=torch.float32) if h_res is None else x.float() @ g.transpose(-1, -2)
    grad_h_out = (h_post.unsqueeze(-1) * g).sum(-2)
    grad_h_post = (g * h_out.float().unsqueeze(-2)).sum(-1)
    return grad_x.to(x.dtype), grad_h_res, grad_h_out.to(h_out.dtype), grad_h_post


def _setup(ctx, inputs, output):
    x, h_res, h_out, h_post = inputs
    ctx.has_res = h_res is not None
    ctx.save_for_backward(x, h_res if h_res is not None else x.new_empty(0), h_out, h_post)


def _backward(ctx, grad_y):
    x, h_res, h_out, h_post = ctx.saved_tensors
    grads = torch.ops.npu.npu_mhc_post_backward(grad_y, x, h_res if ctx.has_res else None, h_out, h_post)
    return grads[0], grads[1] if ctx.has_res else None, grads[2], grads[3]


@npu_op(
    "npu_mhc_post(Tensor x, Tensor? h_res, Tensor h_out, Tensor h_post) -> Tensor",
    fake=lambda x, h_res, h_out, h_post: torch.empty_like(x),
    backward=_backward,
    setup_context=_setup,
)
def npu_mhc_post(x, h_res, h_out, h_post):
    """y = h_res^T x + h_out (x) h_post (x + h_out (x) h_post without h_res)."""
    _check(x, h_res, h_out, h_post)
    return _forward(x, h_res, h_out, h_post)
