"""The backward operators of DeepSeek sparse attention: npu_lightning_indexer_grad and
npu_sparse_flash_attention_grad (see sparse_attention for the forward formulas).

npu_lightning_indexer_grad: dy [.., N2, topk] is the gradient of the selected scores
    I[t, j] = sum over the heads of a key head's group of weights[t, h] * ReLU(query[t, h] . key[j])
at the keys sparse_indices names (-1 entries and keys masked by sparse_mode 3 get none); returns
(d query, d key, d weights). npu_sparse_flash_attention_grad returns (d query, d key, d value, d query_rope,
d key_rope) of npu_sparse_flash_attention's output for d_out (the rope gradients empty without rope). Both are the
exact gradients of the forward composition, computed in float32 and rounded to the inputs' dtypes (BSND / TND).
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op
from torch_npu.ops.sparse_attention import causal_mask, key_rows, query_batches
from torch_npu.ops.sparse_attention import npu_sparse_flash_attention as sparse_flash_attention
from torch_npu.ops.vjp import recording_gradients

__all__ = []

_BIG = 9223372036854775807


def _selected_scores(query, key, weights, sparse_indices, actual_q, actual_k, layout, sparse_mode, op):
    """Differentiable scores at the selected keys [rows, N2, topk] (0 where nothing is selected), and that mask."""
    batches, q_rows = query_batches(query, layout, actual_q, op)
    w_rows = weights.reshape(-1, weights.shape[-1])
    idx_rows = sparse_indices.reshape(q_rows.shape[0], *sparse_indices.shape[-2:]).long()
    n1, n2 = query.shape[-2], key.shape[-2]
    check(n1 % n2 == 0, op, f"query heads ({n1}) must be a multiple of key heads ({n2})")
    parts, masks = [], []
    for batch, start, rows in batches:
        keys = key_rows(key, layout, actual_k, None, batch, op).float()
        idx = idx_rows[start : start + rows]
        if rows == 0:
            continue
        q = q_rows[start : start + rows].float().reshape(rows, n2, n1 // n2, -1)
        w = w_rows[start : start + rows].float().reshape(rows, n2, n1 // n2, 1)
        score = (torch.relu(torch.einsum("qngd,knd->qngk", q, keys)) * w).sum(2)  # [rows, n2, S2]
        valid = (idx >= 0) & (idx < keys.shape[0])
        safe = idx.clamp(0, max(keys.shape[0] - 1, 0))
        masked = causal_mask(rows, keys.shape[0], sparse_mode, query.device, op)
        valid &= ~masked[torch.arange(rows, device=query.device)[:, None, None], safe]
        parts.append(torch.gather(score, 2, safe) * valid)
        masks.append(valid)
    return torch.cat(parts), torch.cat(masks)


@npu_op(
    "npu_lightning_indexer_grad(Tensor query, Tensor key, Tensor dy, Tensor sparse_indices, Tensor weights, "
    'Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_key=None, str? layout="BSND", '
    "int? sparse_mode=3, int? pre_tokens=9223372036854775807, int? next_tokens=9223372036854775807) "
    "-> (Tensor, Tensor, Tensor)",
    fake=lambda query, key, dy, sparse_indices, weights, *args, **kwargs: (
        torch.empty_like(query),
        torch.empty_like(key),
        torch.empty_like(weights),
    ),  # fmt: skip
)
def npu_lightning_indexer_grad(query, key, dy, sparse_indices, weights, actual_seq_lengths_query=None,
                               actual_seq_lengths_key=None, layout="BSND", sparse_mode=3, pre_tokens=_BIG,
                               next_tokens=_BIG):  # fmt: skip
    """(d_query, d_key, d_weights)."""
    op = "npu_lightning_indexer_grad"
    check(dy.shape == sparse_indices.shape, op, f"dy must have sparse_indices' shape {tuple(sparse_indices.shape)}, got {tuple(dy.shape)}")  # fmt: skip
    leaves = [t.detach().float().requires_grad_(True) for t in (query, key, weights)]
    with recording_gradients():
        scores, valid = _selected_scores(*leaves, sparse_indices, actual_seq_lengths_query, actual_seq_lengths_key,
                                         layout or "BSND", 3 if sparse_mode is None else sparse_mode, op)  # fmt: skip
        upstream = dy.float().reshape(scores.shape) * valid
        grads = torch.autograd.grad(scores, leaves, upstream, allow_unused=True)
    return tuple(torch.zeros_like(t) if g is None else g.to(t.dtype) for g, t in zip(grads, (query, key, weights)))


def _sfa_grad_fake(query, key, value, sparse_indices, d_out, out, softmax_max, softmax_sum, scale_value,
                   sparse_block_size, query_rope=None, key_rope=None, *args, **kwargs):  # fmt: skip
    empty = query.new_empty(0)
    return (torch.empty_like(query), torch.empty_like(key), torch.empty_like(value),
            empty if query_rope is None else torch.empty_like(query_rope), empty if key_rope is None else torch.empty_like(key_rope))  # fmt: skip


@npu_op(
    "npu_sparse_flash_attention_grad(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, Tensor d_out, "
    "Tensor out, Tensor softmax_max, Tensor softmax_sum, float scale_value, int sparse_block_size, "
    "Tensor? query_rope=None, Tensor? key_rope=None, Tensor? actual_seq_qlen=None, Tensor? actual_seq_kvlen=None, "
    'str? layout="BSND", int? sparse_mode=3, int? pre_tokens=9223372036854775807, '
    "int? next_tokens=9223372036854775807, int? attention_mode=0) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=_sfa_grad_fake,
)
def npu_sparse_flash_attention_grad(query, key, value, sparse_indices, d_out, out, softmax_max, softmax_sum,
                                    scale_value, sparse_block_size, query_rope=None, key_rope=None,
                                    actual_seq_qlen=None, actual_seq_kvlen=None, layout="BSND", sparse_mode=3,
                                    pre_tokens=_BIG, next_tokens=_BIG, attention_mode=0):  # fmt: skip
    """(d_query, d_key, d_value, d_query_rope, d_key_rope)."""
    inputs = [query, key, value, query_rope, key_rope]
    leaves = [None if t is None else t.detach().float().requires_grad_(True) for t in inputs]
    layout = layout or "BSND"
    with recording_gradients():
        result, _, _ = sparse_flash_attention(
            leaves[0], leaves[1], leaves[2], sparse_indices, scale_value, actual_seq_lengths_query=actual_seq_qlen,
            actual_seq_lengths_kv=actual_seq_kvlen, query_rope=leaves[3], key_rope=leaves[4],
            sparse_block_size=sparse_block_size, layout_query=layout, layout_kv=layout,
            sparse_mode=3 if sparse_mode is None else sparse_mode, attention_mode=attention_mode or 0,
        )  # fmt: skip
        present = [leaf for leaf in leaves if leaf is not None]
        grads = iter(torch.autograd.grad(result, present, d_out.float(), allow_unused=True))
    outs = []
    for leaf, original in zip(leaves, inputs):
        if leaf is None:
            outs.append(query.new_empty(0))
            continue
        g = next(grads)
        outs.append(torch.zeros_like(original) if g is None else g.to(original.dtype))
    return tuple(outs)
