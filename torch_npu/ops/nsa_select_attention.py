"""npu_nsa_select_attention / npu_nsa_select_attention_grad: Native Sparse Attention's selected branch: each query
token attends the key blocks its topk_indices name (NsaSelectedAttention, TND layout, training).

query [T1, N1, D], key [T2, N2, D], value [T2, N2, D2]; actual_seq_qlen / actual_seq_kvlen cumulative per batch;
topk_indices [T1, N2, select_block_count]: block numbers (of select_block_size keys, counted from the batch's
first key) for each query token and key head (-1 skipped). Query head n reads key head n // (N1 / N2):
    P = softmax(scale_value * q k_sel^T)   (atten_mask [S1, S2], True = masked, drops keys too)
    attention_out = P v_sel, P rounded to the inputs' dtype first (as op-plugin's golden)
softmax_max / softmax_sum [T1, N1, 8]. Computed in float32. The grad recomputes P and returns (dq, dk, dv);
npu_nsa_select_attention is differentiable through it.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.nsa_compress_attention import cumulative_spans
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import recording_gradients

__all__ = []

_OP = "npu_nsa_select_attention"


def _attend(query, key, value, topk_indices, scale, block, mask, qlen, kvlen, round_probs, op):
    """(out [T1, N1, D2], row_max [T1, N1], row_sum [T1, N1]) in float32 (differentiable in query / key / value)."""
    check(query.dim() == 3 and key.dim() == 3 and value.dim() == 3, op, "query, key and value must be TND [T, N, D]")
    n1, n2 = query.shape[1], key.shape[1]
    check(n1 % n2 == 0, op, f"query heads ({n1}) must be a multiple of key heads ({n2})")
    check(topk_indices.dim() == 3 and topk_indices.shape[:2] == (query.shape[0], n2), op,
          f"topk_indices must be [{query.shape[0]}, {n2}, select_block_count], got {tuple(topk_indices.shape)}")  # fmt: skip
    group = n1 // n2
    q_spans, k_spans = cumulative_spans(qlen, op, "actual_seq_qlen"), cumulative_spans(kvlen, op, "actual_seq_kvlen")
    check(len(q_spans) == len(k_spans), op, "actual_seq_qlen and actual_seq_kvlen must hold one entry per batch")
    outs, maxes, sums = [], [], []
    offsets = torch.arange(block, device=query.device)
    for (qa, qb), (ka, kb) in zip(q_spans, k_spans):
        s1, s2 = qb - qa, kb - ka
        if s1 == 0:
            continue
        blocks = topk_indices[qa:qb].long()  # [S1, N2, C]
        positions = (blocks[..., None] * block + offsets).flatten(-2)  # [S1, N2, C * block]
        valid = (blocks[..., None] >= 0).expand(*blocks.shape, block).flatten(-2) & (positions < s2)
        if mask is not None:
            rows = torch.arange(s1, device=query.device)[:, None, None]
            valid = valid & ~mask[rows, positions.clamp(0, s2 - 1)].bool()
        safe = positions.clamp(0, max(s2 - 1, 0)) + ka
        heads = torch.arange(n2, device=query.device)[None, :, None]
        k_sel = key.float()[safe, heads]  # [S1, N2, C * block, D]
        v_sel = value.float()[safe, heads]
        q = query[qa:qb].float().reshape(s1, n2, group, -1)
        scores = torch.einsum("sngd,snkd->sngk", q, k_sel) * scale
        scores = scores.masked_fill(~valid[:, :, None, :], float("-inf"))
        peak = scores.amax(-1, keepdim=True)
        finite = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
        e = torch.exp(scores - finite)
        total = e.sum(-1, keepdim=True)
        probs = e / total.clamp(min=1e-30)
        if round_probs is not None:
            probs = probs.to(round_probs).float()
        outs.append(torch.einsum("sngk,snkd->sngd", probs, v_sel).reshape(s1, n1, -1))
        maxes.append(peak.reshape(s1, n1))
        sums.append(total.reshape(s1, n1))
    return torch.cat(outs), torch.cat(maxes), torch.cat(sums)


def _setup(ctx, inputs, output, keyword_only_inputs=None):
    kw = keyword_only_inputs or {}
    ctx.args = (inputs[4], inputs[5], inputs[6], inputs[7], kw.get("atten_mask"), kw.get("actual_seq_qlen"),
                kw.get("actual_seq_kvlen"))  # fmt: skip
    ctx.save_for_backward(*inputs[:4], *output)


def _backward(ctx, grad_out, *unused):
    query, key, value, topk, out, smax, ssum = ctx.saved_tensors
    scale, heads, block, count, mask, qlen, kvlen = ctx.args
    grads = torch.ops.npu.npu_nsa_select_attention_grad(
        grad_out, query, key, value, out, smax, ssum, topk, scale, heads, block, count, atten_mask=mask,
        actual_seq_qlen=qlen, actual_seq_kvlen=kvlen,
    )  # fmt: skip
    return (*grads, None, None, None, None, None)


def _fake(query, key, value, topk_indices, scale_value, head_num, select_block_size, select_block_count, *,
          atten_mask=None, actual_seq_qlen=None, actual_seq_kvlen=None):  # fmt: skip
    stats = query.new_empty(query.shape[0], query.shape[1], 8, dtype=torch.float32)
    return query.new_empty(query.shape[0], query.shape[1], value.shape[-1]), stats, torch.empty_like(stats)


@npu_op(
    "npu_nsa_select_attention(Tensor query, Tensor key, Tensor value, Tensor topk_indices, float scale_value, "
    "int head_num, int select_block_size, int select_block_count, *, Tensor? atten_mask=None, "
    "int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None) -> (Tensor, Tensor, Tensor)",
    fake=_fake,
    backward=_backward,
    setup_context=_setup,
)
def npu_nsa_select_attention(query, key, value, topk_indices, scale_value, head_num, select_block_size,
                             select_block_count, *, atten_mask=None, actual_seq_qlen=None, actual_seq_kvlen=None):  # fmt: skip
    """(attention_out, softmax_max, softmax_sum)."""
    check(query.shape[1] == head_num, _OP, f"head_num ({head_num}) differs from query's heads ({query.shape[1]})")
    check(topk_indices.shape[-1] == select_block_count, _OP, f"topk_indices must hold select_block_count ({select_block_count}) blocks per row, got {topk_indices.shape[-1]}")  # fmt: skip
    out, row_max, row_sum = _attend(query, key, value, topk_indices, scale_value, select_block_size, atten_mask,
                                    actual_seq_qlen, actual_seq_kvlen, query.dtype, _OP)  # fmt: skip
    widen = lambda t: t[..., None].expand(*t.shape, 8).contiguous()  # noqa: E731
    return out.to(query.dtype), widen(row_max), widen(row_sum)


@npu_op(
    "npu_nsa_select_attention_grad(Tensor grad, Tensor query, Tensor key, Tensor value, Tensor attention_out, "
    "Tensor softmax_max, Tensor softmax_sum, Tensor topk_indices, float scale_value, int head_num, "
    "int select_block_size, int select_block_count, *, Tensor? atten_mask=None, int[]? actual_seq_qlen=None, "
    "int[]? actual_seq_kvlen=None) -> (Tensor, Tensor, Tensor)",
    fake=lambda grad, query, key, value, *args, **kwargs: (
        torch.empty_like(query),
        torch.empty_like(key),
        torch.empty_like(value),
    ),  # fmt: skip
)
def npu_nsa_select_attention_grad(grad, query, key, value, attention_out, softmax_max, softmax_sum, topk_indices,
                                  scale_value, head_num, select_block_size, select_block_count, *, atten_mask=None,
                                  actual_seq_qlen=None, actual_seq_kvlen=None):  # fmt: skip
    """(dq, dk, dv) in the inputs' dtypes."""
    op = "npu_nsa_select_attention_grad"
    leaves = [t.detach().float().requires_grad_(True) for t in (query, key, value)]
    with recording_gradients():
        out, _, _ = _attend(*leaves, topk_indices, scale_value, select_block_size, atten_mask, actual_seq_qlen,
                            actual_seq_kvlen, None, op)  # fmt: skip
        grads = torch.autograd.grad(out, leaves, grad.float())
    return tuple(g.to(t.dtype) for g, t in zip(grads, (query, key, value)))
