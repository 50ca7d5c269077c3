"""The Lightning Indexer's training losses (DeepSeek V3.2 DSA): the indexer is trained to match the main attention's
distribution, by the KL divergence between the two.

Per query token t (right-down causal, sparse_mode 3: keys j <= t + S2 - S1; sparse_mode 0: all keys):
    I[t, j] = sum_h weights[t, h] * ReLU(query_index[t, h] . key_index[j])             (the indexer's scores)
    p[t, j] = mean over the N1 heads of exp(scale * q[t] . k[j] - softmax_max) / softmax_sum  (the main attention's
              probabilities, q / k with their rope parts appended, from the forward's statistics)
    sy[t] = softmax(I[t]);  loss = sum_t,j p * (log max(p, 1e-8) - log max(sy, 1e-8))
    dI = sy - p;  d weights[t, h] = sum_j dI * ReLU(.);  d query_index / d key_index through the ReLU
npu_dense_lightning_indexer_softmax_lse: the indexer's softmax statistics (max and sum of exp of I over the allowed
keys, [B, N2index, S1] or [N2index, T1]). npu_dense_lightning_indexer_grad_kl_loss: (d query_index, d key_index,
d weights, loss [1]) over all allowed keys, with the indexer's statistics given. npu_sparse_lightning_indexer_grad_kl_loss:
the same over the keys sparse_indices selects ([.., N2index, topk], -1 skipped), the indexer softmax taken over them.
Layouts BSND or TND (actual_seq_qlen / actual_seq_klen cumulative). Computed in float32; gradients in the inputs' dtype.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_BIG = 9223372036854775807
_FLOOR = 1e-8


def _spans(query, key, layout, qlen, klen, op):
    """[(query rows, key rows)] per batch, as slices into [B * S or T] rows, and the batch count."""
    check(layout in ("BSND", "TND"), op, f"layout must be 'BSND' or 'TND', got {layout!r}")
    if layout == "TND":
        check(qlen is not None and klen is not None and len(qlen) == len(klen), op,
              "actual_seq_qlen and actual_seq_klen (cumulative) are required with the TND layout")  # fmt: skip
        q_ends, k_ends = [int(v) for v in qlen], [int(v) for v in klen]
        return [(slice(a, b), slice(c, d)) for a, b, c, d in zip([0, *q_ends[:-1]], q_ends, [0, *k_ends[:-1]], k_ends)]  # fmt: skip
    b, s1, s2 = query.shape[0], query.shape[1], key.shape[1]
    return [(slice(i * s1, (i + 1) * s1), slice(i * s2, (i + 1) * s2)) for i in range(b)]


def _rows(t, layout):
    """[B * S or T, ...] token rows of a BSND / TND tensor."""
    return t.reshape(-1, *t.shape[2:]) if layout == "BSND" else t


def _allowed(s1, s2, sparse_mode, device, op):
    check(sparse_mode in (0, 3), op, f"sparse_mode must be 0 or 3, got {sparse_mode}")
    if sparse_mode == 0:
        return torch.ones(s1, s2, dtype=torch.bool, device=device)
    return torch.arange(s2, device=device)[None, :] <= torch.arange(s1, device=device)[:, None] + (s2 - s1)


def _indexer_scores(qi, ki, w):
    """(I [S1, S2], relu [S1, H, S2]) of one batch: qi [S1, H, D], ki [S2, 1, D], w [S1, H]."""
    relu = torch.relu(torch.einsum("shd,td->sht", qi.float(), ki[:, 0].float()))
    return (relu * w.float()[..., None]).sum(1), relu


def _softmax_stats(scores, keep):
    masked = scores.masked_fill(~keep, float("-inf"))
    row_max = masked.amax(-1)
    total = torch.exp(masked - row_max[:, None]).sum(-1)
    return row_max, total


def _lse_fake(query_index, key_index, weights, *, layout="BSND", **kwargs):
    shape = (key_index.shape[1], query_index.shape[0]) if layout == "TND" else (query_index.shape[0], key_index.shape[2], query_index.shape[1])  # fmt: skip
    return query_index.new_empty(shape, dtype=torch.float32), query_index.new_empty(shape, dtype=torch.float32)


@npu_op(
    "npu_dense_lightning_indexer_softmax_lse(Tensor query_index, Tensor key_index, Tensor weights, *, "
    "SymInt[]? actual_seq_qlen=None, SymInt[]? actual_seq_klen=None, str? layout='BSND', int? sparse_mode=3, "
    "int? pre_tokens=9223372036854775807, int? next_tokens=9223372036854775807) -> (Tensor, Tensor)",
    fake=_lse_fake,
)
def npu_dense_lightning_indexer_softmax_lse(query_index, key_index, weights, *, actual_seq_qlen=None,
                                            actual_seq_klen=None, layout="BSND", sparse_mode=3, pre_tokens=_BIG,
                                            next_tokens=_BIG):  # fmt: skip
    """(softmax_max_index, softmax_sum_index) float32."""
    op = "npu_dense_lightning_indexer_softmax_lse"
    check(query_index.dim() in (3, 4), op, f"The shapes of the input query should be 3 or 4 dimensional, but got {query_index.dim()}-dimensional")  # fmt: skip
    layout = layout or "BSND"
    spans = _spans(query_index, key_index, layout, actual_seq_qlen, actual_seq_klen, op)
    qi, ki, w = _rows(query_index, layout), _rows(key_index, layout), _rows(weights, layout)
    row_max = torch.zeros(qi.shape[0], device=qi.device)
    row_sum = torch.zeros_like(row_max)
    for q_rows, k_rows in spans:
        scores, _ = _indexer_scores(qi[q_rows], ki[k_rows], w[q_rows])
        keep = _allowed(scores.shape[0], scores.shape[1], 3 if sparse_mode is None else sparse_mode, qi.device, op)
        row_max[q_rows], row_sum[q_rows] = _softmax_stats(scores, keep)
    if layout == "TND":
        return row_max[None].contiguous(), row_sum[None].contiguous()
    b, s1 = query_index.shape[:2]
    return row_max.reshape(b, 1, s1), row_sum.reshape(b, 1, s1)


def _main_probs(q, k, smax, ssum, keep, scale):
    """mean over the query heads of the main attention's probabilities [S1, S2]: q [S1, N1, D], k [S2, N2, D],
    smax / ssum [S1, N1]."""
    group = q.shape[1] // k.shape[1]
    scores = torch.einsum("snd,tnd->snt", q.float(), k.float().repeat_interleave(group, 1)) * scale
    probs = torch.exp(scores - smax[..., None]) / ssum[..., None]
    return (probs * keep[:, None, :]).sum(1) / q.shape[1]


def _loss_and_grads(p, sy, relu, qi, ki, w, keep):
    """(loss, dqi [S1, H, D], dki [S2, 1, D], dw [S1, H]) of one batch."""
    loss = (p * (torch.log(p.clamp(min=_FLOOR)) - torch.log(sy.clamp(min=_FLOOR)))).sum()
    d = (sy - p) * keep
    dw = (d[:, None, :] * relu).sum(-1)
    relu_grad = d[:, None, :] * w.float()[..., None] * (relu > 0)
    dqi = torch.einsum("sht,td->shd", relu_grad, ki[:, 0].float())
    dki = torch.einsum("sht,shd->td", relu_grad, qi.float())[:, None]
    return loss, dqi, dki, dw


def _stats_rows(stat, layout, n2, op, name):
    """[rows, N1] per-head statistics of the main attention from [B, N2, S1, G] (BSND) or [N2, T1, G] (TND)."""
    if layout == "TND":
        check(stat.dim() == 3, op, f"{name} must be [N2, T1, G] for TND, got {tuple(stat.shape)}")
        return stat.permute(1, 0, 2).reshape(stat.shape[1], -1).float()
    check(stat.dim() == 4, op, f"{name} must be [B, N2, S1, G] for BSND, got {tuple(stat.shape)}")
    return stat.permute(0, 2, 1, 3).reshape(stat.shape[0] * stat.shape[2], -1).float()


def _kl_fake(query, key, query_index, key_index, weights, *args, **kwargs):
    return (torch.empty_like(query_index), torch.empty_like(key_index), torch.empty_like(weights),
            query.new_empty(1, dtype=torch.float32))  # fmt: skip


def _kl_loss(query, key, query_index, key_index, weights, softmax_max, softmax_sum, scale_value, query_rope, key_rope,
             actual_seq_qlen, actual_seq_klen, layout, sparse_mode, op, index_stats=None, sparse_indices=None):  # fmt: skip
    layout = layout or "BSND"
    sparse_mode = 3 if sparse_mode is None else sparse_mode
    check((query_rope is None) == (key_rope is None), op, "query_rope and key_rope go together")
    q = torch.cat([query, query_rope], -1) if query_rope is not None else query
    k = torch.cat([key, key_rope], -1) if key_rope is not None else key
    spans = _spans(q, k, layout, actual_seq_qlen, actual_seq_klen, op)
    q, k, qi, ki, w = (_rows(t, layout) for t in (q, k, query_index, key_index, weights))
    smax, ssum = (_stats_rows(t, layout, k.shape[1], op, name) for t, name in ((softmax_max, "softmax_max"), (softmax_sum, "softmax_sum")))  # fmt: skip
    if index_stats is not None:
        imax, isum = (t.reshape(-1).float() for t in index_stats)
    chosen_rows = _rows(sparse_indices, layout) if sparse_indices is not None else None
    dqi, dki, dw = torch.zeros(qi.shape, device=qi.device), torch.zeros(ki.shape, device=ki.device), torch.zeros(w.shape, device=w.device)  # fmt: skip
    loss = torch.zeros((), device=q.device)
    for q_rows, k_rows in spans:
        s1, s2 = q[q_rows].shape[0], k[k_rows].shape[0]
        keep = _allowed(s1, s2, sparse_mode, q.device, op)
        if chosen_rows is not None:
            picked = torch.zeros(s1, s2 + 1, dtype=torch.bool, device=q.device)
            idx = chosen_rows[q_rows][:, 0].long()
            picked.scatter_(1, torch.where((idx >= 0) & (idx < s2), idx, s2), True)
            keep = keep & picked[:, :s2]
        scores, relu = _indexer_scores(qi[q_rows], ki[k_rows], w[q_rows])
        masked = scores.masked_fill(~keep, float("-inf"))
        if index_stats is not None:
            sy = torch.exp(masked - imax[q_rows][:, None]) / isum[q_rows][:, None]
        else:
            sy = torch.nan_to_num(torch.softmax(masked, -1), nan=0.0)
        p = _main_probs(q[q_rows], k[k_rows], smax[q_rows], ssum[q_rows], keep, scale_value)
        part, gq, gk, gw = _loss_and_grads(p, sy, relu, qi[q_rows], ki[k_rows], w[q_rows], keep)
        loss = loss + part
        dqi[q_rows], dki[k_rows], dw[q_rows] = gq, gk, gw
    dtype = query.dtype
    return (dqi.reshape(query_index.shape).to(dtype), dki.reshape(key_index.shape).to(dtype),
            dw.reshape(weights.shape).to(dtype), loss.reshape(1))  # fmt: skip


@npu_op(
    "npu_dense_lightning_indexer_grad_kl_loss(Tensor query, Tensor key, Tensor query_index, Tensor key_index, "
    "Tensor weights, Tensor softmax_max, Tensor softmax_sum, Tensor softmax_max_index, Tensor softmax_sum_index, "
    "float scale_value, *, Tensor? query_rope=None, Tensor? key_rope=None, SymInt[]? actual_seq_qlen=None, "
    "SymInt[]? actual_seq_klen=None, str? layout='BSND', int? sparse_mode=3, int? pre_tokens=9223372036854775807, "
    "int? next_tokens=9223372036854775807) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=_kl_fake,
)
def npu_dense_lightning_indexer_grad_kl_loss(query, key, query_index, key_index, weights, softmax_max, softmax_sum,
                                             softmax_max_index, softmax_sum_index, scale_value, *, query_rope=None,
                                             key_rope=None, actual_seq_qlen=None, actual_seq_klen=None,
                                             layout="BSND", sparse_mode=3, pre_tokens=_BIG, next_tokens=_BIG):  # fmt: skip
    """(d_query_index, d_key_index, d_weights, loss [1])."""
    return _kl_loss(query, key, query_index, key_index, weights, softmax_max, softmax_sum, scale_value, query_rope,
                    key_rope, actual_seq_qlen, actual_seq_klen, layout, sparse_mode,
                    "npu_dense_lightning_indexer_grad_kl_loss", index_stats=(softmax_max_index, softmax_sum_index))  # fmt: skip


@npu_op(
    "npu_sparse_lightning_indexer_grad_kl_loss(Tensor query, Tensor key, Tensor query_index, Tensor key_index, "
    "Tensor weights, Tensor sparse_indices, Tensor softmax_max, Tensor softmax_sum, float scale_value, *, "
    "Tensor? query_rope=None, Tensor? key_rope=None, SymInt[]? actual_seq_qlen=None, SymInt[]? actual_seq_klen=None, "
    "str? layout='BSND', int? sparse_mode=3, int? pre_tokens=9223372036854775807, "
    "int? next_tokens=9223372036854775807, Tensor? sinks=None) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=_kl_fake,
)
def npu_sparse_lightning_indexer_grad_kl_loss(query, key, query_index, key_index, weights, sparse_indices, softmax_max,
                                              softmax_sum, scale_value, *, query_rope=None, key_rope=None,
                                              actual_seq_qlen=None, actual_seq_klen=None, layout="BSND",
                                              sparse_mode=3, pre_tokens=_BIG, next_tokens=_BIG, sinks=None):  # fmt: skip
    """(d_query_index, d_key_index, d_weights, loss [1]) over the selected keys."""
    op = "npu_sparse_lightning_indexer_grad_kl_loss"
    check(sinks is None, op, "sinks is not computed by vnpu")
    return _kl_loss(query, key, query_index, key_index, weights, softmax_max, softmax_sum, scale_value, query_rope,
                    key_rope, actual_seq_qlen, actual_seq_klen, layout, sparse_mode, op, sparse_indices=sparse_indices)  # fmt: skip
