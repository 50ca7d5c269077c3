"""npu_multi_head_attention: fairseq's multi-head attention layer in one operator (the fused path of
torch_npu.contrib.module.MultiheadAttention).

query [B * tgt_len, E] and key/value [B * src_len, E] (rows batch-major) are projected (x @ W^T + b),
q is scaled by attn_dim_per_head ** -0.5, heads are split to [B, N, len, D]; scores q @ k^T + attn_mask
(additive, [B, N, tgt_len, src_len]) go through a softmax (in float32 when softmax_use_float), dropout with
the given bit mask (dropout_prob is the drop probability, the mask npu_dropout_gen_mask's), @ v, heads merged
to context [B * tgt_len, E] and the output projection. Returns (y, dropout_mask, q, k, v, softmax, dropout
output, context); gradients reach the inputs, weights and biases (the backward recomputes the composition with
the same mask). dropout_prob > 0 needs dropout_mask: vnpu does not draw one inside the operator, because the
backward has to see the same mask. Everything is computed in the query's dtype (float16 on the card): weights,
biases, key, value and the mask are cast to it.
"""

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check
from torch_npu.ops.dropout_masks import _apply
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_multi_head_attention"


def _heads(x, batch, length, heads, dim):
    return x.view(batch, length, heads, dim).permute(0, 2, 1, 3).contiguous()


@npu_op(
    "npu_multi_head_attention(Tensor query, Tensor key, Tensor value, Tensor query_weight, Tensor key_weight, "
    "Tensor value_weight, Tensor attn_mask, Tensor out_proj_weight, Tensor? query_bias, Tensor? key_bias, "
    "Tensor? value_bias, Tensor? out_proj_bias, Tensor? dropout_mask, int attn_head_num, int attn_dim_per_head, "
    "int src_len, int tgt_len, float dropout_prob, bool softmax_use_float) -> "
    "(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    differentiable=True,
)
def npu_multi_head_attention(
    query,
    key,
    value,
    query_weight,
    key_weight,
    value_weight,
    attn_mask,
    out_proj_weight,
    query_bias,
    key_bias,
    value_bias,
    out_proj_bias,
    dropout_mask,
    attn_head_num,
    attn_dim_per_head,
    src_len,
    tgt_len,
    dropout_prob,
    softmax_use_float,
):
    embed = attn_head_num * attn_dim_per_head
    check(
        query.dim() == 2 and query.shape[1] == embed,
        _OP,
        f"query must be [B * tgt_len, attn_head_num * attn_dim_per_head = {embed}], got {tuple(query.shape)}",
    )
    check(
        tgt_len > 0 and src_len > 0 and query.shape[0] % tgt_len == 0,
        _OP,
        f"query's {query.shape[0]} rows are not a whole number of tgt_len={tgt_len} batches",
    )
    batch = query.shape[0] // tgt_len
    for name, t in (("key", key), ("value", value)):
        check(
            t.dim() == 2 and t.shape[0] == batch * src_len,
            _OP,
            f"{name} must be [B * src_len = {batch * src_len}, E], got {tuple(t.shape)}",
        )
    check(
        tuple(attn_mask.shape[-2:]) == (tgt_len, src_len),
        _OP,
        f"attn_mask must broadcast to [B, N, tgt_len={tgt_len}, src_len={src_len}], got {tuple(attn_mask.shape)}",
    )
    check(
        dropout_mask is not None or dropout_prob == 0.0,
        _OP,
        f"dropout_prob={dropout_prob} needs dropout_mask (npu_dropout_gen_mask); vnpu draws no mask inside",
    )
    dtype = query.dtype
    query_weight, key_weight, value_weight, out_proj_weight = (
        w.to(dtype) for w in (query_weight, key_weight, value_weight, out_proj_weight)
    )
    query_bias, key_bias, value_bias, out_proj_bias = (
        None if b is None else b.to(dtype) for b in (query_bias, key_bias, value_bias, out_proj_bias)
    )
    q = F.linear(query, query_weight, query_bias) * attn_dim_per_head**-0.5
    k = F.linear(key.to(dtype), key_weight, key_bias)
    v = F.linear(value.to(dtype), value_weight, value_bias)
    q = _heads(q, batch, tgt_len, attn_head_num, attn_dim_per_head)
    k = _heads(k, batch, src_len, attn_head_num, attn_dim_per_head)
    v = _heads(v, batch, src_len, attn_head_num, attn_dim_per_head)
    scores = torch.matmul(q, k.transpose(-2, -1)) + attn_mask.to(dtype)
    if softmax_use_float:
        softmax = F.softmax(scores, dim=-1, dtype=torch.float32)
    else:
        softmax = F.softmax(scores, dim=-1)
    probs = softmax.to(scores.dtype, copy=True)  # its own output: outputs must not alias one another
    if dropout_mask is None:
        dropout_mask = torch.empty(0, dtype=torch.uint8, device=query.device)
    else:
        probs = _apply(probs, dropout_mask, dropout_prob, _OP)
    context = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(batch * tgt_len, embed)
    y = F.linear(context, out_proj_weight, out_proj_bias)
    return y, dropout_mask.clone(), q, k, v, softmax, probs, context
