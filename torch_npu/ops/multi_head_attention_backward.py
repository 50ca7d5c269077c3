"""npu_multi_head_attention_backward: the gradients of npu_multi_head_attention from what its forward saved (the
scaled q, k and v per head, the softmax, the dropped-out probabilities and the context) — the attention mask is not
an input, and not needed: it reaches the gradients only through the saved softmax. Returns torch_npu's order
(d query_weight, d key_weight, d value_weight, d out_proj_weight, d query, d key, d value, d query_bias,
d key_bias, d value_bias, d out_proj_bias), computed in the query's dtype like the forward."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dropout_masks import _apply
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_multi_head_attention_backward"


def _merged(x):
    """[B, N, len, D] heads back to [B * len, N * D] rows."""
    batch, heads, length, dim = x.shape
    return x.permute(0, 2, 1, 3).reshape(batch * length, heads * dim)


def _projection_grads(d_out, x, weight):
    """(d x, d weight, d bias) of x @ weight^T + bias given d_out."""
    return d_out @ weight.to(d_out.dtype), (d_out.t() @ x.to(d_out.dtype)).to(weight.dtype), d_out.sum(0)


def _fake(query, key, value, query_weight, key_weight, value_weight, out_proj_weight, *rest):
    grads = [torch.empty_like(w) for w in (query_weight, key_weight, value_weight, out_proj_weight)]
    grads += [torch.empty_like(t) for t in (query, key, value)]
    return (*grads, *(query.new_empty(w.shape[0]) for w in (query_weight, key_weight, value_weight, out_proj_weight)))


@npu_op(
    "npu_multi_head_attention_backward(Tensor query, Tensor key, Tensor value, Tensor query_weight, "
    "Tensor key_weight, Tensor value_weight, Tensor out_proj_weight, Tensor? query_bias, Tensor? key_bias, "
    "Tensor? value_bias, Tensor? out_proj_bias, Tensor query_res, Tensor key_res, Tensor value_res, "
    "Tensor attn_scores, Tensor attn_res, Tensor context, Tensor y_grad, Tensor dropout_mask, int attn_head_num, "
    "int attn_dim_per_head, int src_len, int tgt_len, float dropout_prob, bool softmax_use_float) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=_fake,
)
def npu_multi_head_attention_backward(query, key, value, query_weight, key_weight, value_weight, out_proj_weight,
                                      query_bias, key_bias, value_bias, out_proj_bias, query_res, key_res, value_res,
                                      attn_scores, attn_res, context, y_grad, dropout_mask, attn_head_num,
                                      attn_dim_per_head, src_len, tgt_len, dropout_prob, softmax_use_float):  # fmt: skip
    """The eleven gradients of npu_multi_head_attention (see the module doc)."""
    heads = (query_res.shape[0], attn_head_num, tgt_len, attn_dim_per_head)
    check(
        tuple(query_res.shape) == heads,
        _OP,
        f"query_res must be [B, attn_head_num, tgt_len, attn_dim_per_head] = {list(heads)}, got {list(query_res.shape)}",
    )
    dtype = query.dtype
    d_context, d_out_weight, d_out_bias = _projection_grads(y_grad.to(dtype), context, out_proj_weight)
    batch = query_res.shape[0]
    d_context = d_context.view(batch, tgt_len, attn_head_num, attn_dim_per_head).permute(0, 2, 1, 3)
    d_probs = d_context @ value_res.transpose(-2, -1)
    d_v = attn_res.transpose(-2, -1) @ d_context
    if dropout_mask.numel():
        d_probs = _apply(d_probs, dropout_mask, dropout_prob, _OP)
    softmax = attn_scores.float() if softmax_use_float else attn_scores
    d_probs = d_probs.to(softmax.dtype)
    d_scores = (softmax * (d_probs - (d_probs * softmax).sum(-1, keepdim=True))).to(dtype)
    d_q = (d_scores @ key_res) * attn_dim_per_head**-0.5
    d_k = d_scores.transpose(-2, -1) @ query_res
    d_query, d_query_weight, d_query_bias = _projection_grads(_merged(d_q), query, query_weight)
    d_key, d_key_weight, d_key_bias = _projection_grads(_merged(d_k), key, key_weight)
    d_value, d_value_weight, d_value_bias = _projection_grads(_merged(d_v), value, value_weight)
    return (
        d_query_weight,
        d_key_weight,
        d_value_weight,
        d_out_weight,
        d_query,
        d_key.to(key.dtype),
        d_value.to(value.dtype),
        d_query_bias,
        d_key_bias,
        d_value_bias,
        d_out_bias,
    )
