"""npu_nsa_compress_attention: Native Sparse Attention's compressed-branch attention and the selection of the key
blocks each query attends in the selected branch (NsaCompressAttention, TND layout, training).

query [T1, N1, D], key [T2, N2, D] / value [T2, N2, D2]: the compressed keys (npu_nsa_compress's windows);
actual_seq_qlen, actual_cmp_seq_kvlen and actual_sel_seq_kvlen cumulative per batch. Per batch (query head n reads
key head n // (N1 / N2)):
    P = softmax(scale_value * q k^T - 40000 * atten_mask)      (atten_mask [S1max, S2max], True = masked, its top-left
                                                               corner used for every batch)
    attention_out = P v;  softmax_max / softmax_sum [T1, N1, 8] the row max and sum of exp, repeated 8 times
The importance of select block i (1-based, m = select_block_size / compress_stride, n = compress_block_size /
compress_stride) sums P over the compressed keys m * i - j (0 <= j < m + n - 1) weighted min(j + 1, m + n - 1 - j, n),
over the query heads of each key head; topk_mask (True = always selected) sets a score to 23333; topk_indices
[T1, N2, select_block_count] (int32) are the blocks in descending score, ties to the lower block.
Returns (attention_out, topk_indices, softmax_max, softmax_sum), computed in float32.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_nsa_compress_attention"
_MASKED = -40000.0
_FORCED = 23333.0


def cumulative_spans(ends, op, name):
    check(ends is not None and len(ends) > 0, op, f"{name} (cumulative lengths) is required")
    ends = [int(e) for e in ends]
    check(all(a <= b for a, b in zip([0, *ends], ends)), op, f"{name} must be non-decreasing cumulative lengths, got {ends}")  # fmt: skip
    return list(zip([0, *ends[:-1]], ends))


def importance(probs, blocks, m, n):
    """[N, S1, blocks] importance of each select block from probs [N, S1, S2] over the compressed keys."""
    s2 = probs.shape[-1]
    width = m + n - 1
    scores = probs.new_zeros(*probs.shape[:-1], blocks)
    for i in range(1, blocks + 1):
        for j in range(width):
            key = m * i - j
            if 0 <= key < s2:
                times = min(j + 1 if j < width / 2 else width - j, n)
                scores[..., i - 1] += probs[..., key] * times
    return scores


def _fake(query, key, value, scale_value, head_num, compress_block_size, compress_stride, select_block_size,
          select_block_count, *, topk_mask=None, atten_mask=None, actual_seq_qlen=None, actual_cmp_seq_kvlen=None,
          actual_sel_seq_kvlen=None):  # fmt: skip
    t1, n1 = query.shape[:2]
    stats = query.new_empty(t1, n1, 8, dtype=torch.float32)
    return (query.new_empty(t1, n1, value.shape[-1]), query.new_empty(t1, key.shape[1], select_block_count, dtype=torch.int32),
            stats, torch.empty_like(stats))  # fmt: skip


@npu_op(
    "npu_nsa_compress_attention(Tensor query, Tensor key, Tensor value, float scale_value, int head_num, "
    "int compress_block_size, int compress_stride, int select_block_size, int select_block_count, *, "
    "Tensor? topk_mask=None, Tensor? atten_mask=None, int[]? actual_seq_qlen=None, int[]? actual_cmp_seq_kvlen=None, "
    "int[]? actual_sel_seq_kvlen=None) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=_fake,
)
def npu_nsa_compress_attention(query, key, value, scale_value, head_num, compress_block_size, compress_stride,
                               select_block_size, select_block_count, *, topk_mask=None, atten_mask=None,
                               actual_seq_qlen=None, actual_cmp_seq_kvlen=None, actual_sel_seq_kvlen=None):  # fmt: skip
    """(attention_out, topk_indices, softmax_max, softmax_sum)."""
    check(query.dim() == 3 and key.dim() == 3 and value.dim() == 3, _OP, "query, key and value must be TND [T, N, D]")
    n1, n2 = query.shape[1], key.shape[1]
    check(n1 == head_num, _OP, f"head_num ({head_num}) differs from query's heads ({n1})")
    check(n1 % n2 == 0, _OP, f"query heads ({n1}) must be a multiple of key heads ({n2})")
    check(compress_stride > 0 and compress_block_size % compress_stride == 0 and select_block_size % compress_stride == 0,
          _OP, "compress_block_size and select_block_size must be multiples of compress_stride")  # fmt: skip
    q_spans = cumulative_spans(actual_seq_qlen, _OP, "actual_seq_qlen")
    k_spans = cumulative_spans(actual_cmp_seq_kvlen, _OP, "actual_cmp_seq_kvlen")
    sel_spans = cumulative_spans(actual_sel_seq_kvlen, _OP, "actual_sel_seq_kvlen")
    check(len(q_spans) == len(k_spans) == len(sel_spans), _OP, "the three actual_* lists must hold one entry per batch")
    group = n1 // n2
    m, n = select_block_size // compress_stride, compress_block_size // compress_stride
    out = torch.zeros(query.shape[0], n1, value.shape[-1], device=query.device)
    row_max = torch.zeros(query.shape[0], n1, device=query.device)
    row_sum = torch.zeros_like(row_max)
    topk = torch.zeros(query.shape[0], n2, select_block_count, dtype=torch.int32, device=query.device)
    for (qa, qb), (ka, kb), (sa, sb) in zip(q_spans, k_spans, sel_spans):
        q = query[qa:qb].float().transpose(0, 1)  # [N1, S1, D]
        k = key[ka:kb].float().transpose(0, 1).repeat_interleave(group, 0)
        v = value[ka:kb].float().transpose(0, 1).repeat_interleave(group, 0)
        s1, s2, blocks = qb - qa, kb - ka, sb - sa
        check(blocks >= select_block_count, _OP, f"select_block_count ({select_block_count}) exceeds a batch's select blocks ({blocks})")  # fmt: skip
        scores = q @ k.transpose(1, 2) * scale_value
        if atten_mask is not None:
            scores = scores + atten_mask[:s1, :s2].bool().float() * _MASKED
        peak = scores.amax(-1, keepdim=True)
        e = torch.exp(scores - peak)
        total = e.sum(-1, keepdim=True)
        probs = e / total
        out[qa:qb] = (probs @ v).transpose(0, 1)
        row_max[qa:qb], row_sum[qa:qb] = peak[..., 0].t(), total[..., 0].t()
        score = importance(probs, blocks, m, n).reshape(n2, group, s1, blocks).sum(1)
        if topk_mask is not None:
            score = score.masked_fill(topk_mask[:s1, :blocks].bool(), _FORCED)
        order = torch.sort(score, dim=-1, descending=True, stable=True).indices[..., :select_block_count]
        topk[qa:qb] = order.transpose(0, 1).to(torch.int32)
    widen = lambda t: t[..., None].expand(*t.shape, 8).contiguous()  # noqa: E731
    return out.to(query.dtype), topk, widen(row_max), widen(row_sum)
