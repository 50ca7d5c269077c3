"""DeepSeek sparse attention (DSA): npu_lightning_indexer picks the key tokens each query token attends to, and
npu_sparse_flash_attention attends over those tokens only.

Layouts: query BSND [B, S1, N, D] or TND [T1, N, D] (actual_seq_lengths_query cumulative for TND, per batch
otherwise); key BSND [B, S2, N2, D], TND (cumulative lengths) or PA_BSND (a paged cache [blocks, block_size, N2,
D] read through block_table, per-batch lengths required).

npu_lightning_indexer: score[i, j] = sum over the heads of a key head's group of weights[i, h] * ReLU(q[i, h] .
k[j]) (no scale); sparse_mode 3 masks j > i + (S2 - S1) (right-down causal), 0 masks nothing; the top
sparse_count keys by score (ties to the lower index) in descending score order, -1 (and -inf values) where a
row has fewer valid keys. Returns (indices int32 [.., N2, sparse_count], values in the query's dtype when
return_value, else empty). npu_quant_lightning_indexer scores int8 (or float8) operands as the card does: the exact
dot products, ReLU, / 1024 rounded to float16, weighted by weights * query scale, times the key's scale.

npu_sparse_flash_attention: for query token i, softmax((q . k_j [+ q_rope . k_rope_j]) * scale_value) over the
tokens j named by sparse_indices[i] (-1 entries skipped; sparse_block_size > 1: each index names a block of
that many tokens; sparse_mode 3 also drops j > i + (S2 - S1)), times value_j. sinks [N1] (float32, one logit per
query head) join every row's softmax as an extra key with no value: they raise the maximum and the sum, and take
their share of the probability. Returns (attention_out, softmax_max, softmax_sum), the two statistics
[B, N2, S1, N1 / N2] ([N2, T1, N1 / N2] for TND) when return_softmax_lse, else empty. Computed in float32. Rows with
nothing to attend to are zero.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_BIG = 9223372036854775807


def _lengths(values, cumulative):
    values = [int(v) for v in values.reshape(-1).tolist()]
    if not cumulative:
        return values
    return [b - a for a, b in zip([0, *values[:-1]], values)]


def query_batches(query, layout, actual, op):
    """[(batch, row slice into the query's token rows, rows)], and the query viewed [B * S1 or T1, N, D]."""
    check(layout in ("BSND", "TND"), op, f"layout_query must be 'BSND' or 'TND', got {layout!r}")
    if layout == "TND":
        check(actual is not None, op, "layout_query 'TND' needs actual_seq_lengths_query (cumulative)")
        lengths = _lengths(actual, cumulative=True)
        starts = [sum(lengths[:b]) for b in range(len(lengths))]
        return [(b, starts[b], lengths[b]) for b in range(len(lengths))], query
    b, s1 = query.shape[:2]
    lengths = _lengths(actual, cumulative=False) if actual is not None else [s1] * b
    return [(i, i * s1, lengths[i]) for i in range(b)], query.reshape(b * s1, *query.shape[2:])


def key_rows(key, layout, actual, block_table, batch, op):
    """The first actual key tokens of a batch: [S2', N2, D]."""
    check(layout in ("BSND", "TND", "PA_BSND"), op, f"the key layout must be 'BSND', 'TND' or 'PA_BSND', got {layout!r}")  # fmt: skip
    if layout == "BSND":
        length = _lengths(actual, False)[batch] if actual is not None else key.shape[1]
        return key[batch, :length]
    check(actual is not None, op, f"key layout {layout!r} needs the key's actual sequence lengths")
    if layout == "TND":
        lengths = _lengths(actual, cumulative=True)
        start = sum(lengths[:batch])
        return key[start : start + lengths[batch]]
    check(block_table is not None, op, "key layout 'PA_BSND' needs block_table")
    length = _lengths(actual, False)[batch]
    blocks = block_table[batch, : -(-length // key.shape[1])].long()
    return key[blocks].reshape(-1, *key.shape[2:])[:length]


def causal_mask(rows, keys, sparse_mode, device, op):
    """[rows, keys] True where key j is masked for query row i."""
    check(sparse_mode in (0, 3), op, f"sparse_mode must be 0 or 3, got {sparse_mode}")
    if sparse_mode == 0:
        return torch.zeros(rows, keys, dtype=torch.bool, device=device)
    i = torch.arange(rows, device=device)[:, None]
    return torch.arange(keys, device=device)[None, :] > i + (keys - rows)


def _indexer_fake(query, key, weights, *, layout_query="BSND", sparse_count=2048, return_value=False, **kwargs):
    n2 = key.shape[-2]
    lead = query.shape[:-2]
    values = query.new_empty(*lead, n2, sparse_count) if return_value else query.new_empty(0)
    return query.new_empty(*lead, n2, sparse_count, dtype=torch.int32), values


@npu_op(
    "npu_lightning_indexer(Tensor query, Tensor key, Tensor weights, *, Tensor? actual_seq_lengths_query=None, "
    'Tensor? actual_seq_lengths_key=None, Tensor? block_table=None, str layout_query="BSND", '
    'str layout_key="BSND", int sparse_count=2048, int sparse_mode=3, int pre_tokens=9223372036854775807, '
    "int next_tokens=9223372036854775807, bool return_value=False) -> (Tensor, Tensor)",
    fake=_indexer_fake,
)
def npu_lightning_indexer(query, key, weights, *, actual_seq_lengths_query=None, actual_seq_lengths_key=None,
                          block_table=None, layout_query="BSND", layout_key="BSND", sparse_count=2048, sparse_mode=3,
                          pre_tokens=_BIG, next_tokens=_BIG, return_value=False):  # fmt: skip
    """(top-k key indices, their scores or empty)."""
    indices, values = _indexer(query, key, weights, None, None, actual_seq_lengths_query, actual_seq_lengths_key,
                               block_table, layout_query, layout_key, sparse_count, sparse_mode, "npu_lightning_indexer")  # fmt: skip
    return indices, values.to(query.dtype) if return_value else query.new_empty(0)


def _indexer(query, key, weights, query_scale, key_scale, actual_q, actual_k, block_table, layout_query, layout_key,
             sparse_count, sparse_mode, op):  # fmt: skip
    """(indices int32, scores float32) [.., N2, sparse_count]; with query_scale [.., N1] / key_scale [.., N2] the
    operands are per-token-head quantised (_quantised_scores)."""
    check(sparse_count > 0, op, f"sparse_count must be positive, got {sparse_count}")
    batches, q_rows = query_batches(query, layout_query, actual_q, op)
    w_rows = weights.reshape(-1, weights.shape[-1])
    qs_rows = query_scale.reshape(-1, query_scale.shape[-1]) if query_scale is not None else None
    n1, n2 = query.shape[-2], key.shape[-2]
    check(n1 % n2 == 0, op, f"query heads ({n1}) must be a multiple of key heads ({n2})")
    indices = torch.full((q_rows.shape[0], n2, sparse_count), -1, dtype=torch.int32, device=query.device)
    values = torch.full((q_rows.shape[0], n2, sparse_count), float("-inf"), device=query.device)
    for batch, start, rows in batches:
        keys = key_rows(key, layout_key, actual_k, block_table, batch, op)
        if rows == 0 or keys.shape[0] == 0:
            continue
        # per key head h: the group's query heads [group, rows, D] @ keys [D, S2], in the order of op-plugin's
        # golden references (scores one ulp apart would otherwise swap ranks)
        q = q_rows[start : start + rows].reshape(rows, n2, n1 // n2, -1).permute(1, 2, 0, 3)
        w = w_rows[start : start + rows].reshape(rows, n2, n1 // n2, 1).permute(1, 2, 0, 3)
        if query_scale is None:
            k = keys.float()
            heads = [(torch.relu(q[h].float() @ k[:, h].t()) * w[h].float()).sum(0) for h in range(n2)]
        else:
            k_scale = key_rows(key_scale[..., None], layout_key, actual_k, block_table, batch, op)[..., 0]
            q_scale = qs_rows[start : start + rows].reshape(rows, n2, n1 // n2, 1).permute(1, 2, 0, 3)
            heads = [_quantised_scores(q[h], keys[:, h], w[h] * q_scale[h], k_scale[:, h]) for h in range(n2)]
        score = torch.stack(heads, 1)  # [rows, n2, S2]
        masked = causal_mask(rows, keys.shape[0], sparse_mode, query.device, op)
        score = score.masked_fill(masked[:, None, :], float("-inf"))
        count = min(sparse_count, keys.shape[0])
        top, order = torch.sort(score, dim=-1, descending=True, stable=True)
        top, order = top[..., :count], order[..., :count]
        order = torch.where(torch.isinf(top) & (top < 0), torch.full_like(order, -1), order)
        indices[start : start + rows, :, :count] = order.to(torch.int32)
        values[start : start + rows, :, :count] = top
    shape = (*query.shape[:-2], n2, sparse_count)
    return indices.reshape(shape), values.reshape(shape)


def _quantised_scores(q, k, weight_scale, k_scale):
    """[rows, S2] scores of one key head from quantised q [group, rows, D] and k [S2, D], as the card computes
    them: the integer (or float8) dot products exactly, ReLU, scaled by 1/1024 and rounded to float16; then the
    group's heads weighted by weights * query scale (multiplied in their own dtype) and summed in float32, times
    the key's scale."""
    # int8 dot products are exact in float32 while D * 128 * 128 stays within its 24-bit mantissa
    exact = torch.int32 if q.dtype == torch.int8 and q.shape[-1] > 1024 else torch.float32
    dots = torch.relu(q.to(exact) @ k.to(exact).t()).float() / 1024.0
    dots = dots.half().float().transpose(0, 1)  # [rows, group, S2]
    return torch.bmm(weight_scale.float().permute(1, 2, 0), dots).squeeze(1) * k_scale.float()


@npu_op(
    "npu_quant_lightning_indexer(Tensor query, Tensor key, Tensor weights, Tensor query_dequant_scale, "
    "Tensor key_dequant_scale, int query_quant_mode, int key_quant_mode, *, Tensor? actual_seq_lengths_query=None, "
    'Tensor? actual_seq_lengths_key=None, Tensor? block_table=None, str layout_query="BSND", '
    'str layout_key="BSND", int sparse_count=2048, int sparse_mode=3, int pre_tokens=9223372036854775807, '
    "int next_tokens=9223372036854775807, int? query_dtype=None, int? key_dtype=None) -> Tensor",
    fake=lambda query, key, *args, sparse_count=2048, **kwargs: query.new_empty(
        *query.shape[:-2], key.shape[-2], sparse_count, dtype=torch.int32
    ),
)
def npu_quant_lightning_indexer(query, key, weights, query_dequant_scale, key_dequant_scale, query_quant_mode,
                                key_quant_mode, *, actual_seq_lengths_query=None, actual_seq_lengths_key=None,
                                block_table=None, layout_query="BSND", layout_key="BSND", sparse_count=2048,
                                sparse_mode=3, pre_tokens=_BIG, next_tokens=_BIG, query_dtype=None, key_dtype=None):  # fmt: skip
    """Top-k key indices of the int8 (or float8) indexer: scores ReLU(q_scale * k_scale * q . k) weighted."""
    op = "npu_quant_lightning_indexer"
    check(query_quant_mode == 0 and key_quant_mode == 0, op, f"the quant modes must be 0 (per token and head), got {query_quant_mode} and {key_quant_mode}")  # fmt: skip
    check(query_dtype is None and key_dtype is None, op, "query_dtype / key_dtype (HiFloat8 operands) are not computed by vnpu")  # fmt: skip
    return _indexer(query, key, weights, query_dequant_scale, key_dequant_scale, actual_seq_lengths_query,
                    actual_seq_lengths_key, block_table, layout_query, layout_key, sparse_count, sparse_mode, op)[0]  # fmt: skip


def _sfa_fake(query, key, value, sparse_indices, scale_value, *, layout_query="BSND", return_softmax_lse=False,
              **kwargs):  # fmt: skip
    n1, n2 = query.shape[-2], key.shape[-2]
    if not return_softmax_lse:
        return torch.empty_like(query), query.new_empty(0, dtype=torch.float32), query.new_empty(0, dtype=torch.float32)  # fmt: skip
    if layout_query == "TND":
        stats = (n2, query.shape[0], n1 // n2)
    else:
        stats = (query.shape[0], n2, query.shape[1], n1 // n2)
    return torch.empty_like(query), query.new_empty(stats, dtype=torch.float32), query.new_empty(stats, dtype=torch.float32)  # fmt: skip


@npu_op(
    "npu_sparse_flash_attention(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, float scale_value, "
    "*, Tensor? block_table=None, Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_kv=None, "
    'Tensor? query_rope=None, Tensor? key_rope=None, int sparse_block_size=1, str layout_query="BSND", '
    'str layout_kv="BSND", int sparse_mode=3, int pre_tokens=9223372036854775807, '
    "int next_tokens=9223372036854775807, int attention_mode=0, bool return_softmax_lse=False, "
    "Tensor? sinks=None) -> (Tensor, Tensor, Tensor)",
    fake=_sfa_fake,
)
def npu_sparse_flash_attention(query, key, value, sparse_indices, scale_value, *, block_table=None,
                               actual_seq_lengths_query=None, actual_seq_lengths_kv=None, query_rope=None,
                               key_rope=None, sparse_block_size=1, layout_query="BSND", layout_kv="BSND",
                               sparse_mode=3, pre_tokens=_BIG, next_tokens=_BIG, attention_mode=0,
                               return_softmax_lse=False, sinks=None):  # fmt: skip
    """(attention_out, softmax_max, softmax_sum)."""
    op = "npu_sparse_flash_attention"
    check(sparse_block_size >= 1, op, f"sparse_block_size must be at least 1, got {sparse_block_size}")
    check((query_rope is None) == (key_rope is None), op, "query_rope and key_rope go together")
    batches, q_rows = query_batches(query, layout_query, actual_seq_lengths_query, op)
    qr_rows = query_rope.reshape(q_rows.shape[0], *query_rope.shape[-2:]) if query_rope is not None else None
    idx_rows = sparse_indices.reshape(q_rows.shape[0], *sparse_indices.shape[-2:])
    n1, n2 = query.shape[-2], key.shape[-2]
    group = n1 // n2
    if sinks is not None:
        check(tuple(sinks.shape) == (n1,), op, f"sinks must be [N1={n1}], got {tuple(sinks.shape)}")
        sinks = sinks.float().reshape(1, n2, group, 1)
    out = torch.zeros(q_rows.shape[0], n1, value.shape[-1], device=query.device)
    smax = torch.zeros(q_rows.shape[0], n2, group, device=query.device)
    ssum = torch.zeros_like(smax)
    for batch, start, rows in batches:
        keys = key_rows(key, layout_kv, actual_seq_lengths_kv, block_table, batch, op).float()
        vals = key_rows(value, layout_kv, actual_seq_lengths_kv, block_table, batch, op).float()
        krope = key_rows(key_rope, layout_kv, actual_seq_lengths_kv, block_table, batch, op).float() if key_rope is not None else None  # fmt: skip
        s2 = keys.shape[0]
        if rows == 0 or s2 == 0:
            continue
        chosen = idx_rows[start : start + rows].long()  # [rows, n2, K]
        if sparse_block_size > 1:
            offsets = torch.arange(sparse_block_size, device=query.device)
            chosen = torch.where(chosen[..., None] >= 0, chosen[..., None] * sparse_block_size + offsets, -1).flatten(
                -2
            )
        valid = (chosen >= 0) & (chosen < s2)
        if sparse_mode == 3:
            limit = torch.arange(rows, device=query.device)[:, None, None] + (s2 - rows)
            valid &= chosen <= limit
        else:
            check(sparse_mode == 0, op, f"sparse_mode must be 0 or 3, got {sparse_mode}")
        safe = chosen.clamp(0, s2 - 1)
        k_sel = keys[safe, torch.arange(n2, device=query.device)[None, :, None]]  # [rows, n2, K, D]
        v_sel = vals[safe, torch.arange(n2, device=query.device)[None, :, None]]
        q = q_rows[start : start + rows].float().reshape(rows, n2, group, -1)
        scores = torch.einsum("rngd,rnkd->rngk", q, k_sel)
        if krope is not None:
            qr = qr_rows[start : start + rows].float().reshape(rows, n2, group, -1)
            scores = scores + torch.einsum("rngd,rnkd->rngk", qr, krope[safe, torch.arange(n2, device=query.device)[None, :, None]])  # fmt: skip
        scores = (scores * scale_value).masked_fill(~valid[:, :, None, :], float("-inf"))
        row_max = scores.amax(-1, keepdim=True)
        if sinks is not None:
            row_max = torch.maximum(row_max, sinks)
        finite_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
        weights = torch.exp(scores - finite_max)
        total = weights.sum(-1, keepdim=True)
        if sinks is not None:
            total = total + torch.exp(sinks - finite_max)
        probs = torch.where(total > 0, weights / total.clamp(min=1e-30), torch.zeros_like(weights))
        out[start : start + rows] = torch.einsum("rngk,rnkd->rngd", probs, v_sel).reshape(rows, n1, -1)
        smax[start : start + rows], ssum[start : start + rows] = row_max[..., 0], total[..., 0]
    attention = out.to(query.dtype).reshape(*query.shape[:-1], value.shape[-1])
    if not return_softmax_lse:
        empty = query.new_empty(0, dtype=torch.float32)
        return attention, empty, empty
    if layout_query == "TND":
        return attention, smax.permute(1, 0, 2).contiguous(), ssum.permute(1, 0, 2).contiguous()
    b, s1 = query.shape[:2]
    stats = lambda t: t.reshape(b, s1, n2, group).permute(0, 2, 1, 3).contiguous()  # noqa: E731
    return attention, stats(smax), stats(ssum)
