"""npu_mhc_pre / npu_mhc_pre_backward: the input mapping of manifold-constrained hyper-connections (mHC).

x [T, n, D] or [B, S, n, D] (float16 / bfloat16) is flattened per token to [nD]; with r = 1 / rms(x) (inv_rms,
float32 per token) and gamma [n, D] (optional, ones without it):

    h_mix = (x * gamma) @ phi^T                          [.., n^2 + 2n]   (phi: W_pre, W_post, W_res rows)
    H_pre, H_post, H_res = alpha[k] * h_mix[segment k] * r + bias[segment k]
    h_pre = sigmoid(H_pre) + hc_eps;  h_post = 2 sigmoid(H_post);  h_res = H_res as [.., n, n]
    h_in = sum_i h_pre[i] * x[i]                         [.., D] in x's dtype

so r * h_mix is RmsNorm(x) @ phi^T (h_mix is kept before the rms scaling, as DeepSeek's hc_pre computes it).
Returns (h_in, h_post, h_res, inv_rms, h_mix, h_pre); with out_flag 0 the last three are empty, as the card
skips them. The backward takes the forward's inv_rms / h_mix / h_pre / h_post and returns (grad_x, grad_phi,
grad_alpha, grad_bias, grad_gamma); npu_mhc_pre is differentiable through it (out_flag 1 is needed for that).
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_mhc_pre"


def _segments(n):
    return (slice(0, n), slice(n, 2 * n), slice(2 * n, n * n + 2 * n))


def _check(x, phi, alpha, op):
    check(x.dim() in (3, 4), op, f"x must be [T, n, D] or [B, S, n, D], got {tuple(x.shape)}")
    check(x.dtype in (torch.float16, torch.bfloat16), op, f"x must be float16 or bfloat16, got {x.dtype}")
    n, d = x.shape[-2], x.shape[-1]
    check(tuple(phi.shape) == (n * n + 2 * n, n * d), op, f"phi must be [{n * n + 2 * n}, {n * d}], got {tuple(phi.shape)}")  # fmt: skip
    check(alpha.numel() == 3, op, f"alpha must hold 3 values (pre, post, res), got {alpha.numel()}")


def _pre(x, phi, alpha, bias, gamma, norm_eps, hc_eps):
    lead, n, d = x.shape[:-2], x.shape[-2], x.shape[-1]
    flat = x.float().reshape(*lead, n * d)
    inv_rms = torch.rsqrt(flat.pow(2).mean(-1) + norm_eps)
    scaled = flat if gamma is None else flat * gamma.float().reshape(n * d)
    h_mix = scaled @ phi.float().t()
    lin = [alpha.float()[k] * h_mix[..., s] * inv_rms[..., None] + bias.float()[s] for k, s in enumerate(_segments(n))]
    h_pre = torch.sigmoid(lin[0]) + hc_eps
    h_post = 2 * torch.sigmoid(lin[1])
    h_res = lin[2].reshape(*lead, n, n)
    h_in = (h_pre[..., None] * x.float()).sum(-2).to(x.dtype)
    return h_in, h_post, h_res, inv_rms, h_mix, h_pre


def _fake(x, phi, alpha, bias, *, gamma=None, norm_eps=1e-6, hc_eps=1e-6, out_flag=0, inner_precise=0):
    lead, n, d = x.shape[:-2], x.shape[-2], x.shape[-1]
    f32 = dict(dtype=torch.float32)
    empty = x.new_empty(0, **f32)
    optional = (x.new_empty(*lead, **f32), x.new_empty(*lead, n * n + 2 * n, **f32), x.new_empty(*lead, n, **f32))
    return (x.new_empty(*lead, d), x.new_empty(*lead, n, **f32), x.new_empty(*lead, n, n, **f32),
            *(optional if out_flag else (empty, empty, empty)))  # fmt: skip


def _setup(ctx, inputs, output, keyword_only_inputs=None):
    kw = keyword_only_inputs or {}
    ctx.out_flag = kw.get("out_flag", 0)
    x, phi, alpha, _ = inputs
    gamma = kw.get("gamma")
    ctx.has_gamma, ctx.hc_eps = gamma is not None, kw.get("hc_eps", 1e-6)
    ctx.save_for_backward(x, phi, alpha, gamma if gamma is not None else x.new_empty(0), *output[3:], output[1])


def _backward(ctx, grad_h_in, grad_h_post, grad_h_res, *unused):
    check(ctx.out_flag == 1, _OP, "the backward needs inv_rms, h_mix and h_pre: call with out_flag=1")
    x, phi, alpha, gamma, inv_rms, h_mix, h_pre, h_post = ctx.saved_tensors
    zeros = lambda like, g: torch.zeros_like(like) if g is None else g  # noqa: E731
    grads = torch.ops.npu.npu_mhc_pre_backward(
        x, phi, alpha, zeros(x[..., 0, :], grad_h_in), zeros(h_post, grad_h_post), zeros(h_mix[..., : h_post.shape[-1] ** 2].unflatten(-1, (h_post.shape[-1],) * 2), grad_h_res),  # fmt: skip
        inv_rms, h_mix, h_pre, h_post, gamma if ctx.has_gamma else None, ctx.hc_eps,
    )  # fmt: skip
    grad_x, grad_phi, grad_alpha, grad_bias, grad_gamma = grads
    ctx.keyword_grads = {"gamma": grad_gamma} if ctx.has_gamma else {}
    return grad_x, grad_phi, grad_alpha, grad_bias


@npu_op(
    "npu_mhc_pre(Tensor x, Tensor phi, Tensor alpha, Tensor bias, *, Tensor? gamma=None, float norm_eps=1e-6, "
    "float hc_eps=1e-6, int out_flag=0, int inner_precise=0) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=_fake,
    backward=_backward,
    setup_context=_setup,
)
def npu_mhc_pre(x, phi, alpha, bias, *, gamma=None, norm_eps=1e-6, hc_eps=1e-6, out_flag=0, inner_precise=0):
    """(h_in, h_post, h_res, inv_rms, h_mix, h_pre)."""
    _check(x, phi, alpha, _OP)
    check(out_flag in (0, 1), _OP, f"out_flag must be 0 or 1, got {out_flag}")
    outputs = _pre(x, phi, alpha, bias, gamma, norm_eps, hc_eps)
    if out_flag:
        return outputs
    empty = x.new_empty(0, dtype=torch.float32)
    return (*outputs[:3], empty, empty, empty)


@npu_op(
    "npu_mhc_pre_backward(Tensor x, Tensor phi, Tensor alpha, Tensor grad_h_in, Tensor grad_h_post, "
    "Tensor grad_h_res, Tensor inv_rms, Tensor h_mix, Tensor h_pre, Tensor h_post, Tensor? gamma=None, "
    "float hc_eps=1e-6, Tensor? grad_x_post=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)"
)
def npu_mhc_pre_backward(x, phi, alpha, grad_h_in, grad_h_post, grad_h_res, inv_rms, h_mix, h_pre, h_post,
                         gamma=None, hc_eps=1e-6, grad_x_post=None):  # fmt: skip
    """(grad_x, grad_phi, grad_alpha, grad_bias, grad_gamma); grad_x_post (the residual stream's gradient) is
    added to grad_x."""
    op = "npu_mhc_pre_backward"
    _check(x, phi, alpha, op)
    lead, n, d = x.shape[:-2], x.shape[-2], x.shape[-1]
    flat = x.float().reshape(-1, n * d)
    r, m = inv_rms.float().reshape(-1), h_mix.float().reshape(-1, n * n + 2 * n)
    s_pre = h_pre.float().reshape(-1, n) - hc_eps
    s_post = h_post.float().reshape(-1, n) / 2
    d_h_pre = (grad_h_in.float().reshape(-1, 1, d) * x.float().reshape(-1, n, d)).sum(-1)
    d_lin = torch.cat([
        d_h_pre * s_pre * (1 - s_pre),
        grad_h_post.float().reshape(-1, n) * 2 * s_post * (1 - s_post),
        grad_h_res.float().reshape(-1, n * n),
    ], -1)  # fmt: skip
    a = torch.cat([alpha.float()[k].expand(s.stop - s.start) for k, s in enumerate(_segments(n))])
    grad_alpha = torch.stack([(d_lin[:, s] * m[:, s] * r[:, None]).sum() for s in _segments(n)])
    grad_bias = d_lin.sum(0)
    dm = d_lin * a * r[:, None]
    dr = (d_lin * a * m).sum(-1)
    g = gamma.float().reshape(n * d) if gamma is not None else None
    scaled = flat if g is None else flat * g
    grad_phi = dm.t() @ scaled
    d_scaled = dm @ phi.float()
    grad_gamma = (d_scaled * flat).sum(0).reshape(n, d) if g is not None else x.new_empty(0, dtype=torch.float32)
    dx = d_scaled if g is None else d_scaled * g
    dx = dx - dr[:, None] * r.pow(3)[:, None] * flat / (n * d)
    dx = dx.reshape(-1, n, d) + h_pre.float().reshape(-1, n, 1) * grad_h_in.float().reshape(-1, 1, d)
    if grad_x_post is not None:
        dx = dx + grad_x_post.float().reshape(-1, n, d)
    return (dx.reshape(*lead, n, d).to(x.dtype), grad_phi.to(phi.dtype), grad_alpha.to(alpha.dtype),
            grad_bias, grad_gamma)  # fmt: skip
