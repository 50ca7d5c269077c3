"""The attention arithmetic shared by torch_npu's attention operators.

Tensors are brought to [B, N, S, D]; scores are accumulated in float32 as
    s = scale * (q @ k^T + pse) - 10000 * mask (torch_npu's golden formula),
    p = softmax(s), optional dropout (keep_prob), out = p @ v, cast back to the input dtype.
attend returns the softmax statistic logsumexp(s); attend_with_stats returns torch_npu's (row max, row sum).
Masks are boolean, True = masked (not attended), as torch_npu's atten_mask.
"""

import torch

from torch_npu.ops._common import check

MASKED = -10000.0
# float32 scores formed at once (4 MiB): a block that stays in the cache while it is exponentiated, summed and
# multiplied by V. Blocks hold whole heads where they fit (a matmul over few query rows is slow): at B=2 N=8
# S=512 D=64 the forward takes 21.8 ms against 25.9 ms with one 64 MiB block; longer sequences gain 10-17 %.
_SCORE_BLOCK_ELEMENTS = 1 << 20
LAYOUTS = ("BSH", "SBH", "BSND", "BNSD", "TND")


def to_bnsd(t, layout, heads, op, name):
    """[B, N, S, D] view of t in `layout` (BSH/SBH: `heads` heads of width H / heads)."""
    if layout in ("BSH", "SBH"):
        check(t.dim() == 3, op, f"{name} must be 3-D for layout {layout}, got {t.dim()}-D")
        check(t.shape[-1] % heads == 0, op, f"{name}'s hidden size {t.shape[-1]} is not divisible by {heads} heads")
        d = t.shape[-1] // heads
        if layout == "BSH":
            return t.view(t.shape[0], t.shape[1], heads, d).transpose(1, 2)
        return t.view(t.shape[0], t.shape[1], heads, d).permute(1, 2, 0, 3)
    check(t.dim() == 4, op, f"{name} must be 4-D for layout {layout}, got {t.dim()}-D")
    return t.transpose(1, 2) if layout == "BSND" else t


def from_bnsd(t, layout):
    b, n, s, d = t.shape
    if layout == "BSH":
        return t.transpose(1, 2).reshape(b, s, n * d)
    if layout == "SBH":
        return t.permute(2, 0, 1, 3).reshape(s, b, n * d)
    if layout == "BSND":
        return t.transpose(1, 2).contiguous()
    return t.contiguous()


def check_head_sizes(q, k, op):
    """Q.K^T needs query and key heads of one width (the value's may be narrower, as in MLA)."""
    check(q.shape[-1] == k.shape[-1], op, f"query and key head sizes differ ({q.shape[-1]} vs {k.shape[-1]})")


def expand_kv(k, v, heads, op):
    """Grouped-query attention: repeat key/value heads to the query's head count."""
    kv_heads = k.shape[1]
    check(
        kv_heads > 0 and heads % kv_heads == 0,
        op,
        f"the query's {heads} heads must be a multiple of the key/value heads ({kv_heads})",
    )
    if kv_heads != heads:
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
    return k, v


def band_mask(s1, s2, pre, nxt, device, shift=0):
    """True where key j is outside [i + shift - pre, i + shift + nxt] for query i."""
    i = torch.arange(s1, device=device).unsqueeze(1) + shift
    j = torch.arange(s2, device=device).unsqueeze(0)
    return (j < i - pre) | (j > i + nxt)


def as_bool_mask(mask, op):
    if mask is None:
        return None
    check(mask.dtype in (torch.bool, torch.uint8), op, f"atten_mask must be bool or uint8, got {mask.dtype}")
    return mask.to(torch.bool)


def score_bias(q, *, scale, mask=None, pse=None):
    """The additive term of the scores: scale * pse + (-10000 where masked), or None."""
    bias = None
    if pse is not None:
        bias = pse.float() * scale
    if mask is not None:
        masked = mask.to(torch.float32) * MASKED
        bias = masked if bias is None else bias + masked
    return bias


def attend(q, k, v, *, scale, mask=None, pse=None):
    """(out, lse) for q [B, N, S1, D], k/v [B, N, S2, D]; lse = logsumexp of the scores, float32 [B, N, S1, 1].
    PyTorch's fused CPU flash-attention kernel (float32 accumulation) unless a gradient must reach pse."""
    bias = score_bias(q, scale=scale, mask=mask, pse=pse)
    if bias is None or not bias.requires_grad:
        attn_mask = None if bias is None else bias.to(q.dtype)
        dv = v.shape[-1]
        if dv < q.shape[-1]:  # MLA (rope joined to q and k): zero columns leave every other output column as it is
            v = torch.nn.functional.pad(v, (0, q.shape[-1] - dv))
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, False, attn_mask=attn_mask, scale=scale
        )
        return out[..., :dv], lse.unsqueeze(-1)
    out, row_max, row_sum = attend_with_stats(q, k, v, scale=scale, mask=mask, pse=pse)
    return out, row_max + torch.log(row_sum)


def _block_of(t, index):
    """The block `index` (batch, head, query-row slices) of a scores-shaped tensor ([..., S1, S2], its dims aligned
    to [B, N, S1, S2] from the right) that may broadcast (size 1) over any of them."""
    full = (*index, slice(None))[4 - t.dim() :]
    return t[tuple(part if size > 1 else slice(None) for part, size in zip(full, t.shape))]


def _cat(parts, dim):
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim)


def _blockwise(b, n, s1, s2, compute):
    """compute(index) for each block of the [B, N, S1, S2] scores — whole heads (and batches) while a block holds
    at most _SCORE_BLOCK_ELEMENTS scores, else row blocks of one head — its [b, n, rows, ...] results joined."""
    per_head = max(1, s1 * s2)
    # rows of one head in multiples of 8: MKL's sgemm then sums each score as it does for the whole head
    batches, heads, rows = 1, 1, max(8, _SCORE_BLOCK_ELEMENTS // max(1, s2) // 8 * 8)
    if per_head * n <= _SCORE_BLOCK_ELEMENTS:
        batches, heads, rows = _SCORE_BLOCK_ELEMENTS // (per_head * max(1, n)), n, s1
    elif per_head <= _SCORE_BLOCK_ELEMENTS:
        heads, rows = _SCORE_BLOCK_ELEMENTS // per_head, s1
    by_batch = []
    for b0 in range(0, max(b, 1), batches):
        by_head = []
        for h0 in range(0, max(n, 1), heads):
            by_row = [
                compute((slice(b0, b0 + batches), slice(h0, h0 + heads), slice(r0, r0 + rows)))
                for r0 in range(0, max(s1, 1), rows)
            ]
            by_head.append([_cat(list(parts), 2) for parts in zip(*by_row)])
        by_batch.append([_cat(list(parts), 1) for parts in zip(*by_head)])
    return tuple(_cat(list(parts), 0) for parts in zip(*by_batch))


def attend_with_half_scores(q, k, v, *, scale, mask=None, pse=None):
    """(out, lse) as the prompt-attention kernel computes float16 inputs: Q·Kᵀ accumulated in float32 and
    rounded to float16, then scaled, biased and put through a float32 softmax; P·V in float32."""
    bias = score_bias(q, scale=scale, mask=mask, pse=pse)
    kt, vf = k.float().transpose(-2, -1), v.float()

    def block(index):
        batch, heads, rows = index
        s = torch.matmul(q[batch, heads, rows].float(), kt[batch, heads]).to(q.dtype).float() * scale
        if bias is not None:
            s = s + _block_of(bias, index)
        lse = torch.logsumexp(s, -1, keepdim=True)
        return torch.matmul(torch.exp(s - lse), vf[batch, heads]).to(q.dtype), lse

    return _blockwise(q.shape[0], q.shape[1], q.shape[2], k.shape[2], block)


def attend_with_stats(q, k, v, *, scale, mask=None, pse=None, keep_prob=1.0, dropout_mask=None, sink=None):
    """(out, row_max, row_sum): the attention and torch_npu's softmax statistics, float32 [B, N, S1, 1] —
    row_max = max_j s_ij, row_sum = sum_j exp(s_ij - row_max). Optional dropout keeps dropout_mask's True
    entries, scaled by 1 / keep_prob. sink ([N], optional): one learnable score per head joining every row's
    softmax with a zero value (row_sum includes exp(sink - row_max)). The scores are formed a block at a time
    (_blockwise), so memory stays bounded for long sequences; no gradient flows through row_max (the softmax
    does not depend on it)."""
    bias = score_bias(q, scale=scale, mask=mask, pse=pse)
    sink_scores = None if sink is None else sink.float().reshape(1, -1, 1, 1)
    kt, vf = k.float().transpose(-2, -1), v.float()

    def block(index):
        batch, heads, rows = index
        s = torch.matmul(q[batch, heads, rows].float() * scale, kt[batch, heads])
        if bias is not None:
            s = s + _block_of(bias, index)
        row_max = s.detach().amax(-1, keepdim=True)
        e = torch.exp_(s.sub_(row_max))
        row_sum = e.sum(-1, keepdim=True)
        if sink_scores is not None:
            row_sum = row_sum + torch.exp(_block_of(sink_scores, index) - row_max)
        if keep_prob < 1.0:
            e = e * _block_of(dropout_mask, index).to(torch.float32) / keep_prob
        return (torch.matmul(e, vf[batch, heads]) / row_sum).to(q.dtype), row_max, row_sum.detach()

    return _blockwise(q.shape[0], q.shape[1], q.shape[2], k.shape[2], block)


def attend_backward(dout, q, k, v, out, lse, *, scale, mask=None, pse=None):
    """(dq, dk, dv) of attend without dropout, from its saved output and lse (the fused CPU kernel)."""
    bias = score_bias(q, scale=scale, mask=mask, pse=pse)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        dout,
        q,
        k,
        v,
        out,
        lse.squeeze(-1),
        0.0,
        False,
        attn_mask=None if bias is None else bias.to(q.dtype),
        scale=scale,
    )


def dropout_keep_mask(shape, keep_prob, seed, device):
    """The dropout keep-mask of a (seed, shape): the same seed gives the same mask (forward and backward)."""
    generator = torch.Generator().manual_seed(int(seed))
    return (torch.rand(shape, generator=generator) < keep_prob).to(device)


def cumulative_to_lengths(cumulative, op, name):
    check(cumulative is not None and len(cumulative) > 0, op, f"layout TND needs {name} (cumulative lengths)")
    lengths = [b - a for a, b in zip([0] + list(cumulative[:-1]), cumulative)]
    check(all(length >= 0 for length in lengths), op, f"{name} must be non-decreasing, got {list(cumulative)}")
    return lengths
