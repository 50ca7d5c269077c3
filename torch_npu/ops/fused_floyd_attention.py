"""npu_fused_floyd_attention / npu_fused_floyd_attention_backward: triangle (Floyd) attention over pair
representations, AlphaFold / Evoformer style (FusedFloydAttention).

query [B, H, I, K, C]; key_ij / value_ij [B, H, I, J, C] (edges i -> j); key_jk / value_jk [B, H, J, K, C] (edges
j -> k); atten_mask bool [B, 1, I, 1, J] (True = edge j excluded for row i):
    s[b, h, i, k, j] = q[i, k] . key_ij[i, j] + q[i, k] . key_jk[j, k]   (masked entries - 4e9)
    p = softmax(scale_value * s) over j;  out[i, k] = sum_j p * (value_ij[i, j] + value_jk[j, k])
Returns (softmax_max, softmax_sum [B, H, I, K, 8] float32, the row max and sum of exp repeated 8 times, and
attention_out in query's dtype), computed in float32. The backward recomputes p and returns the gradients of
query, key_ij, value_ij, key_jk and value_jk; npu_fused_floyd_attention is differentiable through it.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import recording_gradients

__all__ = []

_OP = "npu_fused_floyd_attention"
_MASKED = -4000000000.0
_STAT_WIDTH = 8


def _scores(q, k_ij, k_jk, mask, scale):
    s = torch.einsum("bhikc,bhijc->bhikj", q, k_ij) + torch.einsum("bhikc,bhjkc->bhikj", q, k_jk)
    if mask is not None:
        s = s + mask.bool().float() * _MASKED
    return s * scale


def _checks(q, k_ij, v_ij, k_jk, v_jk, mask, op):
    check(q.dim() == 5, op, f"query_ik must be [B, H, I, K, C], got {tuple(q.shape)}")
    b, h, i, k, c = q.shape
    check(k_ij.dim() == 5 and tuple(k_ij.shape[:3]) == (b, h, i) and k_ij.shape[4] == c, op,
          f"key_ij must be [{b}, {h}, {i}, J, {c}], got {tuple(k_ij.shape)}")  # fmt: skip
    j = k_ij.shape[3]
    check(tuple(k_jk.shape) == (b, h, j, k, c), op, f"key_jk must be {(b, h, j, k, c)}, got {tuple(k_jk.shape)}")
    check(v_ij.shape == k_ij.shape and v_jk.shape == k_jk.shape, op, "value_ij / value_jk must have key_ij / key_jk's shapes")  # fmt: skip
    check(mask is None or tuple(mask.shape) == (b, 1, i, 1, j), op, f"atten_mask must be {(b, 1, i, 1, j)}, got {None if mask is None else tuple(mask.shape)}")  # fmt: skip


def _forward(q, k_ij, v_ij, k_jk, v_jk, mask, scale):
    s = _scores(q.float(), k_ij.float(), k_jk.float(), mask, scale)
    row_max = s.amax(-1, keepdim=True)
    e = torch.exp(s - row_max)
    row_sum = e.sum(-1, keepdim=True)
    p = e / row_sum
    out = torch.einsum("bhikj,bhijc->bhikc", p, v_ij.float()) + torch.einsum("bhikj,bhjkc->bhikc", p, v_jk.float())
    return out, row_max, row_sum


def _setup(ctx, inputs, output, keyword_only_inputs=None):
    kw = keyword_only_inputs or {}
    ctx.mask, ctx.scale = kw.get("atten_mask"), kw.get("scale_value", 1.0)
    ctx.save_for_backward(*inputs, output[2], output[0], output[1])


def _backward(ctx, grad_max, grad_sum, grad_out):
    q, k_ij, v_ij, k_jk, v_jk, out, row_max, row_sum = ctx.saved_tensors
    return torch.ops.npu.npu_fused_floyd_attention_backward(
        grad_out, q, k_ij, v_ij, k_jk, v_jk, out, row_max, row_sum, atten_mask=ctx.mask, scale_value=ctx.scale
    )


def _fake(query_ik, key_ij, value_ij, key_jk, value_jk, *, atten_mask=None, scale_value=1.0):
    stats = query_ik.shape[:-1] + (_STAT_WIDTH,)
    return (query_ik.new_empty(stats, dtype=torch.float32), query_ik.new_empty(stats, dtype=torch.float32),
            torch.empty_like(query_ik))  # fmt: skip


@npu_op(
    "npu_fused_floyd_attention(Tensor query_ik, Tensor key_ij, Tensor value_ij, Tensor key_jk, Tensor value_jk, *, "
    "Tensor? atten_mask=None, float scale_value=1.) -> (Tensor, Tensor, Tensor)",
    fake=_fake,
    backward=_backward,
    setup_context=_setup,
)
def npu_fused_floyd_attention(query_ik, key_ij, value_ij, key_jk, value_jk, *, atten_mask=None, scale_value=1.0):
    """(softmax_max, softmax_sum, attention_out)."""
    _checks(query_ik, key_ij, value_ij, key_jk, value_jk, atten_mask, _OP)
    check(query_ik.dtype in (torch.float16, torch.bfloat16), _OP, f"query_ik must be float16 or bfloat16, got {query_ik.dtype}")  # fmt: skip
    out, row_max, row_sum = _forward(query_ik, key_ij, value_ij, key_jk, value_jk, atten_mask, scale_value)
    widen = list(row_max.shape[:-1]) + [_STAT_WIDTH]
    return row_max.expand(widen).contiguous(), row_sum.expand(widen).contiguous(), out.to(query_ik.dtype)


@npu_op(
    "npu_fused_floyd_attention_backward(Tensor grad_output, Tensor query_ik, Tensor key_ij, Tensor value_ij, "
    "Tensor key_jk, Tensor value_jk, Tensor attention_out, Tensor softmax_max, Tensor softmax_sum, *, "
    "Tensor? atten_mask=None, float scale_value=1.) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=lambda grad_output, *tensors, **kwargs: tuple(torch.empty_like(t) for t in tensors[:5]),
)
def npu_fused_floyd_attention_backward(grad_output, query_ik, key_ij, value_ij, key_jk, value_jk, attention_out,
                                       softmax_max, softmax_sum, *, atten_mask=None, scale_value=1.0):  # fmt: skip
    """(d query_ik, d key_ij, d value_ij, d key_jk, d value_jk)."""
    op = "npu_fused_floyd_attention_backward"
    inputs = (query_ik, key_ij, value_ij, key_jk, value_jk)
    _checks(*inputs, atten_mask, op)
    leaves = [t.detach().float().requires_grad_(True) for t in inputs]
    with recording_gradients():
        out, _, _ = _forward(*leaves, atten_mask, scale_value)
        grads = torch.autograd.grad(out, leaves, grad_output.float())
    return tuple(g.to(t.dtype) for g, t in zip(grads, inputs))
