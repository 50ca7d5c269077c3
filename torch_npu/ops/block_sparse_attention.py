"""npu_block_sparse_attention / npu_block_sparse_attention_backward: attention in which each query block attends
only the key blocks block_sparse_mask selects (BlockSparseAttention; Rain Fusion / video DiT sparse attention).

Layouts "BNSD" (query [B, N1, Sq, D], key / value [B, N2, Skv, D]) or "TND" (tokens of all batches packed,
actual_seq_lengths / actual_seq_lengths_kv the per-batch lengths, summing to T). block_sparse_mask (int8)
[B, N1, ceil(Sq / bx), ceil(Skv / by)] with block_shape [bx, by]: 1 = the query block attends the key block.
Query head n reads key / value head n // (N1 / N2). out = softmax(scale * q k^T over the selected keys) v, computed in
float32 and rounded to query's dtype; softmax_lse (float32, [B, N1, Sq, 1] / [T, N1, 1]) is the log-sum-exp of
the selected scores (-inf, with a zero output, for a query that selects nothing). The backward recomputes the
probabilities and returns (dq, dk, dv); npu_block_sparse_attention is differentiable through it.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import recording_gradients

__all__ = []

_OP = "npu_block_sparse_attention"
_LAYOUTS = ("TND", "BNSD")


def _batches(query, key, q_layout, kv_layout, lengths, lengths_kv, op):
    """[(q [N1, Sq, D] rows of batch b, k rows, index to put the output back)] per batch."""
    check(q_layout in _LAYOUTS and kv_layout == q_layout, op,
          f"q_input_layout and kv_input_layout must both be 'TND' or both 'BNSD', got {q_layout!r} and {kv_layout!r}")  # fmt: skip
    check((lengths is None) == (lengths_kv is None), op, "actual_seq_lengths and actual_seq_lengths_kv must be given together")  # fmt: skip
    if q_layout == "TND":
        check(lengths is not None, op, "actual_seq_lengths and actual_seq_lengths_kv are required with the TND layout")
        check(sum(lengths) == query.shape[0] and sum(lengths_kv) == key.shape[0], op,
              f"actual_seq_lengths must sum to the tokens of query ({query.shape[0]}) and actual_seq_lengths_kv to those of key ({key.shape[0]})")  # fmt: skip
        q_starts = [sum(lengths[:b]) for b in range(len(lengths))]
        kv_starts = [sum(lengths_kv[:b]) for b in range(len(lengths_kv))]
        return [(slice(q_starts[b], q_starts[b] + lengths[b]), slice(kv_starts[b], kv_starts[b] + lengths_kv[b]))
                for b in range(len(lengths))]  # fmt: skip
    batch = query.shape[0]
    lengths = lengths or [query.shape[2]] * batch
    lengths_kv = lengths_kv or [key.shape[2]] * batch
    return [(slice(0, lengths[b]), slice(0, lengths_kv[b])) for b in range(batch)]


def _head(t, layout, b, rows):
    """[N, S, D] of batch b."""
    return t[rows].transpose(0, 1) if layout == "TND" else t[b, :, rows]


def _attend(query, key, value, mask, block_shape, layout, lengths, lengths_kv, heads_kv, scale, op):
    """(out float32 in query's layout, lse float32) of the block-sparse attention."""
    check(query.dim() == (3 if layout == "TND" else 4), op, f"query must be {'[T, N, D]' if layout == 'TND' else '[B, N, S, D]'}, got {tuple(query.shape)}")  # fmt: skip
    check(len(block_shape) >= 2 and all(b > 0 for b in block_shape), op, f"block_shape must hold two positive sizes, got {list(block_shape)}")  # fmt: skip
    bx, by = int(block_shape[0]), int(block_shape[1])
    heads = query.shape[-2] if layout == "TND" else query.shape[1]
    kv_heads = key.shape[-2] if layout == "TND" else key.shape[1]
    check(kv_heads == heads_kv, op, f"num_key_value_heads ({heads_kv}) differs from key's heads ({kv_heads})")
    check(heads % kv_heads == 0, op, f"query heads ({heads}) must be a multiple of key / value heads ({kv_heads})")
    group = heads // kv_heads
    spans = _batches(query, key, layout, layout, lengths, lengths_kv, op)
    check(mask.dim() == 4 and mask.shape[0] == len(spans) and mask.shape[1] == heads, op,
          f"block_sparse_mask must be [{len(spans)}, {heads}, ceil(Sq / {bx}), ceil(Skv / {by})], got {tuple(mask.shape)}")  # fmt: skip
    out = torch.zeros(query.shape[:-1] + value.shape[-1:], device=query.device)
    lse = torch.full(query.shape[:-1] + (1,), float("-inf"), device=query.device)
    for b, (rows, rows_kv) in enumerate(spans):
        q = _head(query, layout, b, rows).float()
        k = _head(key, layout, b, rows_kv).float().repeat_interleave(group, 0)
        v = _head(value, layout, b, rows_kv).float().repeat_interleave(group, 0)
        sq, skv = q.shape[1], k.shape[1]
        keep = mask[b].bool().repeat_interleave(bx, 1)[:, :sq].repeat_interleave(by, 2)[:, :, :skv]
        scores = torch.where(keep, scale * (q @ k.transpose(1, 2)), float("-inf"))
        row_lse = torch.logsumexp(scores, -1, keepdim=True)
        probs = torch.where(keep, torch.exp(scores - torch.where(torch.isinf(row_lse), 0.0, row_lse)), 0.0)
        part = probs @ v
        if layout == "TND":
            out[rows] = part.transpose(0, 1)
            lse[rows] = row_lse.transpose(0, 1)
        else:
            out[b, :, rows] = part
            lse[b, :, rows] = row_lse
    return out, lse


def _scale(scale_value, query):
    return float(scale_value) if scale_value else query.shape[-1] ** -0.5


def _setup(ctx, inputs, output, keyword_only_inputs=None):
    ctx.args = (inputs[4], keyword_only_inputs or {})
    ctx.save_for_backward(*inputs[:4], output[0], output[1])


def _backward(ctx, grad_out, grad_lse):
    query, key, value, mask, out, lse = ctx.saved_tensors
    block_shape, kw = ctx.args
    layout = kw.get("q_input_layout", "TND")
    grads = torch.ops.npu.npu_block_sparse_attention_backward(
        grad_out, query, key, value, out, lse, mask, block_shape, kw.get("actual_seq_lengths"),
        kw.get("actual_seq_lengths_kv"), layout, kw.get("kv_input_layout", "TND"), kw.get("num_key_value_heads", 1),
        kw.get("scale_value", 0.0),
    )  # fmt: skip
    return (*grads, None, None)


def _fake(query, key, value, block_sparse_mask, block_shape, *, q_input_layout="TND", kv_input_layout="TND",
          num_key_value_heads=1, scale_value=0.0, inner_precise=1, actual_seq_lengths=None,
          actual_seq_lengths_kv=None, softmax_lse_flag=0):  # fmt: skip
    shape = query.shape[:-1]
    return query.new_empty(*shape, value.shape[-1]), query.new_empty(*shape, 1, dtype=torch.float32)


@npu_op(
    "npu_block_sparse_attention(Tensor query, Tensor key, Tensor value, Tensor block_sparse_mask, int[] block_shape, "
    "*, str q_input_layout='TND', str kv_input_layout='TND', int num_key_value_heads=1, float scale_value=0.0, "
    "int inner_precise=1, int[]? actual_seq_lengths=None, int[]? actual_seq_lengths_kv=None, "
    "int? softmax_lse_flag=0) -> (Tensor, Tensor)",
    fake=_fake,
    backward=_backward,
    setup_context=_setup,
)
def npu_block_sparse_attention(query, key, value, block_sparse_mask, block_shape, *, q_input_layout="TND",
                               kv_input_layout="TND", num_key_value_heads=1, scale_value=0.0, inner_precise=1,
                               actual_seq_lengths=None, actual_seq_lengths_kv=None, softmax_lse_flag=0):  # fmt: skip
    """(attention_out, softmax_lse)."""
    check(query.dtype in (torch.float16, torch.bfloat16), _OP, f"query must be float16 or bfloat16, got {query.dtype}")
    check(key.dtype == query.dtype and value.dtype == query.dtype, _OP, "query, key and value must share one dtype")
    check(q_input_layout == kv_input_layout, _OP, "kv_input_layout must match q_input_layout")
    out, lse = _attend(query, key, value, block_sparse_mask, block_shape, q_input_layout, actual_seq_lengths,
                       actual_seq_lengths_kv, num_key_value_heads, _scale(scale_value, query), _OP)  # fmt: skip
    return out.to(query.dtype), lse


@npu_op(
    "npu_block_sparse_attention_backward(Tensor d_out, Tensor query, Tensor key, Tensor value, Tensor attention_out, "
    "Tensor softmax_lse, Tensor block_sparse_mask, int[]? block_shape, int[]? actual_seq_lengths, "
    "int[]? actual_seq_lengths_kv, str q_input_layout, str kv_input_layout, int num_key_value_heads, "
    "float scale_value) -> (Tensor, Tensor, Tensor)",
    fake=lambda d_out, query, key, value, *args: (
        torch.empty_like(query),
        torch.empty_like(key),
        torch.empty_like(value),
    ),  # fmt: skip
)
def npu_block_sparse_attention_backward(d_out, query, key, value, attention_out, softmax_lse, block_sparse_mask,
                                        block_shape, actual_seq_lengths, actual_seq_lengths_kv, q_input_layout,
                                        kv_input_layout, num_key_value_heads, scale_value):  # fmt: skip
    """(dq, dk, dv) in the inputs' dtypes."""
    op = "npu_block_sparse_attention_backward"
    check(q_input_layout == kv_input_layout, op, "kv_input_layout must match q_input_layout")
    leaves = [t.detach().float().requires_grad_(True) for t in (query, key, value)]
    with recording_gradients():
        out, _ = _attend(*leaves, block_sparse_mask, block_shape or [128, 128], q_input_layout, actual_seq_lengths,
                         actual_seq_lengths_kv, num_key_value_heads, _scale(scale_value, query), op)  # fmt: skip
        grads = torch.autograd.grad(out, leaves, d_out.float(), allow_unused=True)
    return tuple((torch.zeros_like(t) if g is None else g.to(t.dtype)) for g, t in zip(grads, (query, key, value)))
