"""Native Sparse Attention at inference, over paged key / value caches: npu_nsa_compress_attention_infer and
npu_nsa_select_attention_infer run npu_nsa_compress_attention / npu_nsa_select_attention's arithmetic on the caches
read through block_table.

Caches are [blocks, page_block_size, N2 * D] or [blocks, page_block_size, N2, D]; block_table [B, max blocks]; the
key / value lengths (actual_cmp_seq_kvlen, actual_seq_kvlen) and select-block counts (actual_sel_seq_kvlen) are per
batch. Queries: TND (actual_seq_qlen cumulative) or BSND / BSH [B, S, ...] (actual_seq_qlen per batch, S by default).
npu_nsa_compress_attention_infer returns (attention_out in query's layout, topk_indices [.., N2, select_block_count]);
npu_nsa_select_attention_infer returns attention_out, its topk_indices [.., N2, select_block_count] naming blocks of
the batch's key sequence.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []


def _logical(cache, block_table, lengths, heads, page, op, name):
    """[sum(lengths), N2, D] rows of the paged cache, batch after batch."""
    check(cache.dim() in (3, 4), op, f"{name} must be [blocks, {page}, H] or [blocks, {page}, N, D], got {tuple(cache.shape)}")  # fmt: skip
    check(cache.shape[1] == page, op, f"{name}'s block size {cache.shape[1]} differs from page_block_size {page}")
    pages = cache if cache.dim() == 4 else cache.reshape(cache.shape[0], page, heads, -1)
    check(block_table is not None and block_table.shape[0] == len(lengths), op, f"block_table must hold one row per batch ({len(lengths)})")  # fmt: skip
    rows = []
    for b, length in enumerate(lengths):
        positions = torch.arange(int(length), device=cache.device)
        check(int(length) <= block_table.shape[1] * page, op, f"batch {b}'s {length} tokens exceed its block_table row")
        rows.append(pages[block_table[b].long()[positions // page], positions % page])
    return torch.cat(rows)


def _queries(query, layout, heads, qlen, op):
    """(query as TND [T, N1, D], cumulative query lengths, a function putting TND rows back in the layout)."""
    check(layout in ("TND", "BSND", "BSH"), op, f"layout must be 'TND', 'BSND' or 'BSH', got {layout!r}")
    if layout == "TND":
        check(qlen is not None, op, "actual_seq_qlen (cumulative) is required with the TND layout")
        return query, [int(v) for v in qlen], lambda t, merge_heads=True: t
    b, s = query.shape[:2]
    q = query.reshape(b, s, heads, -1)
    lengths = [int(v) for v in qlen] if qlen is not None else [s] * b
    check(len(lengths) == b and all(0 <= v <= s for v in lengths), op, f"actual_seq_qlen must hold {b} lengths within {s}")  # fmt: skip
    flat = torch.cat([q[i, : lengths[i]] for i in range(b)])
    cumulative = [sum(lengths[: i + 1]) for i in range(b)]

    def back(t, merge_heads=True):
        out = t.new_zeros(b, s, *t.shape[1:])
        for i in range(b):
            out[i, : lengths[i]] = t[cumulative[i] - lengths[i] : cumulative[i]]
        return out.reshape(b, s, -1) if layout == "BSH" and merge_heads else out

    return flat, cumulative, back


def _out_fake(query, value, heads, kv_heads, layout):
    d2 = value.shape[-1] if value.dim() == 4 else value.shape[-1] // kv_heads
    if layout == "BSH":
        return query.new_empty(*query.shape[:2], heads * d2)
    return query.new_empty(*query.shape[:-1], d2)


def _compress_fake(query, value, heads, kv_heads, count, layout):
    lead = query.shape[:1] if layout == "TND" else query.shape[:2]
    return _out_fake(query, value, heads, kv_heads, layout), query.new_empty(*lead, kv_heads, count, dtype=torch.int32)


def _cumulative(values):
    values = [int(v) for v in values]
    return [sum(values[: i + 1]) for i in range(len(values))]


@npu_op(
    "npu_nsa_compress_attention_infer(Tensor query, Tensor key, Tensor value, float scale_value, int head_num, "
    "int key_value_head_num, int select_block_size, int select_block_count, int page_block_size, "
    "int compress_block_size, int compress_stride, *, str layout='TND', Tensor? atten_mask=None, "
    "Tensor? block_table=None, Tensor? topk_mask=None, int[]? actual_seq_qlen=None, int[]? actual_cmp_seq_kvlen=None, "
    "int[]? actual_sel_seq_kvlen=None) -> (Tensor, Tensor)",
    fake=lambda query,
    key,
    value,
    scale_value,
    head_num,
    key_value_head_num,
    select_block_size,
    select_block_count,
    *args,
    layout="TND",
    **kwargs: _compress_fake(query, value, head_num, key_value_head_num, select_block_count, layout),  # noqa: E501
)
def npu_nsa_compress_attention_infer(query, key, value, scale_value, head_num, key_value_head_num, select_block_size,
                                     select_block_count, page_block_size, compress_block_size, compress_stride, *,
                                     layout="TND", atten_mask=None, block_table=None, topk_mask=None,
                                     actual_seq_qlen=None, actual_cmp_seq_kvlen=None, actual_sel_seq_kvlen=None):  # fmt: skip
    """(attention_out, topk_indices)."""
    op = "npu_nsa_compress_attention_infer"
    check(actual_cmp_seq_kvlen is not None and actual_sel_seq_kvlen is not None, op,
          "actual_cmp_seq_kvlen and actual_sel_seq_kvlen (per batch) are required")  # fmt: skip
    q, qlen, back = _queries(query, layout, head_num, actual_seq_qlen, op)
    k = _logical(key, block_table, actual_cmp_seq_kvlen, key_value_head_num, page_block_size, op, "key")
    v = _logical(value, block_table, actual_cmp_seq_kvlen, key_value_head_num, page_block_size, op, "value")
    out, topk, _, _ = torch.ops.npu.npu_nsa_compress_attention(
        q, k, v, scale_value, head_num, compress_block_size, compress_stride, select_block_size, select_block_count,
        topk_mask=topk_mask, atten_mask=atten_mask, actual_seq_qlen=qlen,
        actual_cmp_seq_kvlen=_cumulative(actual_cmp_seq_kvlen), actual_sel_seq_kvlen=_cumulative(actual_sel_seq_kvlen),
    )  # fmt: skip
    return back(out), back(topk, merge_heads=False)


@npu_op(
    "npu_nsa_select_attention_infer(Tensor query, Tensor key, Tensor value, Tensor topk_indices, float scale_value, "
    "int head_num, int key_value_head_num, int select_block_size, int select_block_count, int page_block_size, *, "
    "str layout='BSND', Tensor? atten_mask=None, Tensor? block_table=None, int[]? actual_seq_qlen=None, "
    "int[]? actual_seq_kvlen=None) -> Tensor",
    fake=lambda query,
    key,
    value,
    topk_indices,
    scale_value,
    head_num,
    key_value_head_num,
    *args,
    layout="BSND",
    **kwargs: _out_fake(query, value, head_num, key_value_head_num, layout),  # noqa: E501
)
def npu_nsa_select_attention_infer(query, key, value, topk_indices, scale_value, head_num, key_value_head_num,
                                   select_block_size, select_block_count, page_block_size, *, layout="BSND",
                                   atten_mask=None, block_table=None, actual_seq_qlen=None, actual_seq_kvlen=None):  # fmt: skip
    """attention_out in query's layout."""
    op = "npu_nsa_select_attention_infer"
    check(actual_seq_kvlen is not None, op, "actual_seq_kvlen (per batch) is required")
    q, qlen, back = _queries(query, layout, head_num, actual_seq_qlen, op)
    k = _logical(key, block_table, actual_seq_kvlen, key_value_head_num, page_block_size, op, "key")
    v = _logical(value, block_table, actual_seq_kvlen, key_value_head_num, page_block_size, op, "value")
    if layout == "TND":
        topk = topk_indices
    else:
        b = query.shape[0]
        lengths = [qlen[0]] + [qlen[i] - qlen[i - 1] for i in range(1, b)]
        topk = torch.cat([topk_indices[i, : lengths[i]] for i in range(b)])
    out, _, _ = torch.ops.npu.npu_nsa_select_attention(
        q, k, v, topk, scale_value, head_num, select_block_size, select_block_count, atten_mask=atten_mask,
        actual_seq_qlen=qlen, actual_seq_kvlen=_cumulative(actual_seq_kvlen),
    )  # fmt: skip
    return back(out)
