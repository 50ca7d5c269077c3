"""Inference attention: npu_prompt_flash_attention (prefill), npu_incre_flash_attention (decode, with
paged KV caches) and npu_fused_infer_attention_score (both, plus the softmax logsumexp).

softmax(scale * q @ k^T + pse_shift, masked) @ v with atten_mask True = masked; layouts BSH, BSND,
BNSD, BNSD_BSND (input BNSD, output BSND) and TND (FIA); num_key_value_heads < num_heads is
grouped-query attention. actual_seq_lengths (query rows per batch) and actual_seq_lengths_kv (key
rows per batch) limit each batch; rows past a batch's query length are zero in the output.
Paged KV (block_table [B, max_blocks], block ids per batch): key/value in the card's layouts BnBsH
(blocknum, block_size, H), BnNBsD (blocknum, KV_N, block_size, D) or NZ (blocknum, KV_N, D/16, block_size, 16).
MLA: query_rope/key_rope join query/key head by head; the value's heads may be narrower.
Quantisation (int8 KV caches, int8 attention, int8 output): attention_quant.py. Not supported: KV shared
prefixes, key_rope antiquant, and int8 attention with layout TND.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.attention_core import (
    attend,
    attend_with_half_scores,
    band_mask,
    check_head_sizes,
    expand_kv,
    from_bnsd,
    to_bnsd,
)
from torch_npu.ops.attention_quant import dequantised_kv, int8_attend, requantised_output, split_antiquant
from torch_npu.ops.registration import npu_op

__all__ = []

_BIG = 2147483647


def _split_layout(layout, op):
    check(
        layout
        in ("BSH", "BSND", "BNSD", "BNSD_BSND", "TND", "BSH_NBSD", "BSND_NBSD", "BNSD_NBSD", "TND_NTD", "NTD_TND"),
        op,
        f"input_layout {layout!r} is not supported",
    )
    if "_" in layout:
        return layout.split("_")
    return layout, layout


def _paged(cache, block_table, block_size, batch, op):
    """A paged key/value cache gathered per batch through block_table, with the layout of the result. The card's
    three cache layouts: BnBsH (blocknum, block_size, H) gives [B, S, H] ("BSH"); BnNBsD (blocknum, KV_N,
    block_size, D) and NZ (blocknum, KV_N, D/16, block_size, 16) give [B, KV_N, S, D] ("BNSD")."""
    check(
        block_table.dim() == 2 and block_table.shape[0] == batch,
        op,
        f"block_table must be [B={batch}, max_blocks], got {tuple(block_table.shape)}",
    )
    rank = cache.dim()
    check(
        rank in (3, 4, 5) and cache.shape[1 if rank == 3 else rank - 2] == block_size,
        op,
        f"paged key/value must be (blocknum, block_size={block_size}, H), (blocknum, KV_N, block_size={block_size}, "
        f"D) or NZ (blocknum, KV_N, D/16, block_size={block_size}, 16), got {tuple(cache.shape)}",
    )
    cache = untiled(cache)
    gathered = cache[block_table.long()]  # [B, max_blocks, *one block]
    if rank == 3:
        return gathered.reshape(batch, -1, cache.shape[2]), "BSH"
    # [B, max_blocks, KV_N, block_size, D] -> [B, KV_N, max_blocks * block_size, D]
    return gathered.transpose(1, 2).reshape(batch, cache.shape[1], -1, cache.shape[3]), "BNSD"


def untiled(cache):
    """An NZ paged cache (blocknum, KV_N, D/16, block_size, 16) as BnNBsD (blocknum, KV_N, block_size, D) (a view
    where it can be); other tensors as they are. The tile's width is read from the last dimension (16 values, 32 for
    int8 on the card)."""
    if cache is None or cache.dim() != 5:
        return cache
    blocks, heads, groups, block_size, tile = cache.shape
    return cache.transpose(2, 3).reshape(blocks, heads, block_size, groups * tile)


def with_rope(op, query, query_rope, key, key_rope, input_layout, num_heads, num_key_value_heads, paged):
    """MLA: query_rope and key_rope joined to query and key along each head's dimension, so that Q.K^T adds their
    dot products. Packed layouts (BSH queries, BSH keys and BnBsH caches) hold their heads side by side in the last
    dimension; NZ caches are joined untiled."""
    check(key_rope is not None, op, "query_rope needs key_rope")
    packed_layout = _split_layout(input_layout, op)[0] in ("BSH", "SBH")
    query = _joined(op, "query", query, query_rope, num_heads if packed_layout else None)
    key, key_rope = untiled(key), untiled(key_rope)
    packed_key = key.dim() == 3 and (paged or packed_layout)
    return query, _joined(op, "key", key, key_rope, (num_key_value_heads or num_heads) if packed_key else None)


def _joined(op, name, t, rope, packed_heads):
    if packed_heads is None:
        return torch.cat([t, rope], -1)
    for part, what in ((t, name), (rope, f"{name}_rope")):
        check(
            part.shape[-1] % packed_heads == 0,
            op,
            f"{what}'s hidden size {part.shape[-1]} is not divisible by {packed_heads} heads",
        )
    return torch.cat([t.unflatten(-1, (packed_heads, -1)), rope.unflatten(-1, (packed_heads, -1))], -1).flatten(-2)


def _unsupported(op, **tensors):
    for name, t in tensors.items():
        check(t is None, op, f"{name} is not supported by vnpu")


def _int8_scales(op, dequant_scale1, quant_scale1, dequant_scale2):
    """The int8-attention scales, or None when the attention is not int8."""
    if dequant_scale1 is None and quant_scale1 is None and dequant_scale2 is None:
        return None
    check(
        dequant_scale1 is not None and quant_scale1 is not None and dequant_scale2 is not None,
        op,
        "int8 attention needs dequant_scale1, quant_scale1 and dequant_scale2 together",
    )
    return dequant_scale1, quant_scale1, dequant_scale2


def _dequantised(op, key, value, input_layout, dtype, key_params, value_params, key_mode, value_mode):
    """key and value, dequantised where (scale, offset) parameters are given (NZ paged caches untiled first, their
    channels then per head as in BNSD)."""
    layout = _split_layout(input_layout, op)[0]
    if key.dim() == 5:
        key, value, layout = untiled(key), untiled(value), "BNSD"
    if key_params[0] is not None:
        key = dequantised_kv(key, *key_params, key_mode, layout, dtype, op, "key")
    if value_params[0] is not None:
        value = dequantised_kv(value, *value_params, value_mode, layout, dtype, op, "value")
    return key, value


def _quantised_output(op, out, input_layout, quant_scale2, quant_offset2):
    if quant_scale2 is None:
        check(quant_offset2 is None, op, "quant_offset2 needs quant_scale2")
        return out
    return requantised_output(out, _split_layout(input_layout, op)[1], quant_scale2, quant_offset2, op)


def _infer_attention(
    op,
    query,
    key,
    value,
    *,
    pse_shift,
    atten_mask,
    actual_seq_lengths,
    actual_seq_lengths_kv,
    block_table,
    num_heads,
    scale,
    pre_tokens,
    next_tokens,
    input_layout,
    num_key_value_heads,
    sparse_mode,
    block_size,
    int8_scales=None,
    half_scores=False,
    sink=None,
    length_names=("actual_seq_lengths", "actual_seq_lengths_kv"),
):
    in_layout, out_layout = _split_layout(input_layout, op)
    check(num_heads > 0, op, f"num_heads must be positive, got {num_heads}")
    kv_heads = num_key_value_heads or num_heads
    check(num_heads % kv_heads == 0, op, f"num_key_value_heads={kv_heads} must divide num_heads={num_heads}")
    if in_layout == "NTD":  # packed tokens with the heads first (NTD_TND): the same attention over TND views
        check(query.dim() == 3, op, f"query must be 3-D for layout NTD, got {query.dim()}-D")
        query = query.transpose(0, 1)
        if block_table is None:
            key, value = key.transpose(0, 1), value.transpose(0, 1)
        in_layout = "TND"
    if in_layout == "TND":
        check(int8_scales is None, op, "int8 attention (dequant_scale1) with layout TND is not supported by vnpu")
        return _infer_tnd(
            op,
            query,
            key,
            value,
            atten_mask=atten_mask,
            q_cum=actual_seq_lengths,
            kv_lengths=actual_seq_lengths_kv,
            block_table=block_table,
            block_size=block_size,
            num_heads=num_heads,
            kv_heads=kv_heads,
            scale=scale,
            sparse_mode=sparse_mode,
            window=(pre_tokens, next_tokens),
            out_layout=out_layout,
            sink=sink,
            length_names=length_names,
        )
    q = to_bnsd(query, in_layout, num_heads, op, "query")
    batch = q.shape[0]
    if block_table is not None:
        key, k_layout = _paged(key, block_table, block_size, batch, op)
        value, _ = _paged(value, block_table, block_size, batch, op)
    else:
        k_layout = in_layout
    k = to_bnsd(key, k_layout, kv_heads, op, "key")
    v = to_bnsd(value, k_layout, kv_heads, op, "value")
    check(k.shape[1] == kv_heads, op, f"key has {k.shape[1]} heads, expected num_key_value_heads={kv_heads}")
    check_head_sizes(q, k, op)
    k, v = expand_kv(k, v, num_heads, op)
    s1, s2 = q.shape[2], k.shape[2]
    mask = None
    if atten_mask is not None:
        mask = atten_mask.to(torch.bool)
        mask = mask.view(mask.shape[0], 1, *mask.shape[1:]) if mask.dim() == 3 else mask
        mask = mask[..., :s1, :s2]
    if sparse_mode in (2, 3):
        causal = band_mask(s1, s2, _BIG, 0, q.device, shift=0 if sparse_mode == 2 else s2 - s1)
        mask = causal if mask is None else mask | causal
    elif mask is not None and (pre_tokens < _BIG or next_tokens < _BIG) and sparse_mode in (0, 4):
        mask = mask | band_mask(s1, s2, pre_tokens, next_tokens, q.device, shift=s2 - s1)
    if actual_seq_lengths_kv is not None:
        positions = torch.arange(s2, device=q.device).view(1, 1, 1, s2)
        lengths = list(actual_seq_lengths_kv)
        if all(isinstance(length, int) for length in lengths):
            beyond = positions >= torch.tensor(lengths, device=q.device).view(-1, 1, 1, 1)
        else:  # symbolic in a compiled graph: compared one by one, they stay symbolic (no guard on their values),
            # so one captured graph serves every length (its update plan gives them at replay)
            beyond = torch.cat([positions >= length for length in lengths])
        mask = beyond if mask is None else mask | beyond
    if int8_scales is None and half_scores and q.dtype == torch.float16:
        out, lse = attend_with_half_scores(q, k, v, scale=scale, mask=mask, pse=pse_shift)
    elif int8_scales is None:
        out, lse = attend(q, k, v, scale=scale, mask=mask, pse=pse_shift)
    else:
        out, lse = int8_attend(
            q,
            k,
            v,
            scale=scale,
            mask=mask,
            pse=pse_shift,
            dequant_scale1=int8_scales[0],
            quant_scale1=int8_scales[1],
            dequant_scale2=int8_scales[2],
            op=op,
        )
    if sink is not None:
        out, lse = with_sink(out, lse, sink, head_dim=1, op=op)
    if actual_seq_lengths is not None:
        q_len = torch.tensor(list(actual_seq_lengths), device=q.device).view(-1, 1, 1, 1)
        out = out.masked_fill(torch.arange(s1, device=q.device).view(1, 1, s1, 1) >= q_len, 0)
    if out_layout == "NBSD":
        return out.transpose(0, 1).contiguous(), lse
    return from_bnsd(out, out_layout), lse


def with_sink(out, lse, sink, *, head_dim, op):
    """Attention with a learnable sink: one extra score per head (sink[n]) joins each row's softmax with a zero
    value, so out' = out * exp(lse - lse') with lse' = log(exp(lse) + exp(sink)), the returned logsumexp."""
    heads = out.shape[head_dim]
    check(sink.numel() == heads, op, f"learnable_sink must hold one value per query head ({heads}), got {sink.numel()}")
    shape = [1] * lse.dim()
    shape[head_dim] = heads
    total = torch.logaddexp(lse, sink.float().reshape(shape))
    return (out.float() * torch.exp(lse - total)).to(out.dtype), total


def _tnd_band(s1, s2, sparse_mode, window, has_mask, device, op):
    """The TND attention mask of one batch (True = masked): causal (sparse_mode 2 from the top left, 3 from the
    bottom right) or the pre/next-token band of sparse_mode 4; sparse_mode 0 takes no mask."""
    check(
        sparse_mode in (0, 2, 3, 4),
        op,
        f"layout TND supports sparse_mode 0, 2, 3 and 4, got {sparse_mode}",
    )
    check(
        sparse_mode != 0 or not has_mask,
        op,
        "layout TND takes atten_mask only with sparse_mode 2, 3 or 4 (the mask is generated)",
    )
    if sparse_mode == 0:
        return None
    if sparse_mode == 4:
        return band_mask(s1, s2, window[0], window[1], device, shift=s2 - s1)
    return band_mask(s1, s2, _BIG, 0, device, shift=0 if sparse_mode == 2 else s2 - s1)


def _tnd_kv(key, value, b, rows, block_table, block_size, kv_heads, op):
    """Batch b's key/value [1, N_kv, S2, D]: the packed rows `rows` (a slice) of a TND cache, or the first
    `rows` tokens gathered from the paged cache through block_table[b]."""
    if block_table is None:
        parts = key[rows], value[rows]
        return tuple(t.reshape(t.shape[0], kv_heads, -1).transpose(0, 1).unsqueeze(0) for t in parts)
    gathered = [_paged(t, block_table[b : b + 1], block_size, 1, op) for t in (key, value)]
    names = ("key", "value")
    return tuple(to_bnsd(t, layout, kv_heads, op, name)[:, :, :rows] for (t, layout), name in zip(gathered, names))


def _infer_tnd(
    op,
    query,
    key,
    value,
    *,
    atten_mask,
    q_cum,
    kv_lengths,
    block_table,
    block_size,
    num_heads,
    kv_heads,
    scale,
    sparse_mode,
    window,
    out_layout,
    sink,
    length_names,
):
    """Packed-token attention: q_cum are cumulative query lengths; kv_lengths are cumulative key/value lengths,
    or each batch's own length when the cache is paged (block_table)."""
    check(
        q_cum is not None and kv_lengths is not None,
        op,
        f"layout TND needs {length_names[0]} and {length_names[1]}",
    )
    check(len(q_cum) == len(kv_lengths), op, f"{length_names[0]} and {length_names[1]} must have one entry per batch")
    paged = block_table is not None
    outs, lses = [], []
    q0 = k0 = 0
    for b, (qe, kv_end) in enumerate(zip(q_cum, kv_lengths)):
        q = query[q0:qe].transpose(0, 1).unsqueeze(0)
        rows = kv_end if paged else slice(k0, kv_end)
        k, v = _tnd_kv(key, value, b, rows, block_table, block_size, kv_heads, op)
        check_head_sizes(q, k, op)
        k, v = expand_kv(k, v, num_heads, op)
        mask = _tnd_band(q.shape[2], k.shape[2], sparse_mode, window, atten_mask is not None, q.device, op)
        out, lse = attend(q, k, v, scale=scale, mask=mask)
        outs.append(out[0].transpose(0, 1))
        lses.append(lse[0].transpose(0, 1))
        q0, k0 = qe, kv_end
    out, lse = torch.cat(outs), torch.cat(lses)
    if sink is not None:
        out, lse = with_sink(out, lse, sink, head_dim=1, op=op)
    return (out.transpose(0, 1).contiguous() if out_layout == "NTD" else out), lse


def npu_prompt_flash_attention(
    query,
    key,
    value,
    *,
    padding_mask=None,
    atten_mask=None,
    pse_shift=None,
    actual_seq_lengths=None,
    deq_scale1=None,
    quant_scale1=None,
    deq_scale2=None,
    quant_scale2=None,
    quant_offset2=None,
    num_heads=1,
    scale_value=1.0,
    pre_tokens=_BIG,
    next_tokens=0,
    input_layout="BSH",
    num_key_value_heads=0,
    actual_seq_lengths_kv=None,
    sparse_mode=0,
):
    """Prefill attention; int8 attention with deq_scale1 / quant_scale1 / deq_scale2, int8 output with
    quant_scale2 (+ quant_offset2): see attention_quant.py. In float16 the scores Q·Kᵀ are rounded to float16
    before scaling and the float32 softmax, as the Ascend kernel does."""
    op = "npu_prompt_flash_attention"
    out, _ = _infer_attention(
        op,
        query,
        key,
        value,
        pse_shift=pse_shift,
        atten_mask=atten_mask,
        actual_seq_lengths=actual_seq_lengths,
        actual_seq_lengths_kv=actual_seq_lengths_kv,
        block_table=None,
        num_heads=num_heads,
        scale=scale_value,
        pre_tokens=pre_tokens,
        next_tokens=next_tokens,
        input_layout=input_layout,
        num_key_value_heads=num_key_value_heads,
        sparse_mode=sparse_mode,
        block_size=0,
        int8_scales=_int8_scales(op, deq_scale1, quant_scale1, deq_scale2),
        half_scores=True,  # float16: the kernel rounds Q·Kᵀ to float16 before scaling and the softmax
    )
    return _quantised_output(op, out, input_layout, quant_scale2, quant_offset2)


npu_op(
    "npu_prompt_flash_attention(Tensor query, Tensor key, Tensor value, *, Tensor? padding_mask=None, "
    "Tensor? atten_mask=None, Tensor? pse_shift=None, int[]? actual_seq_lengths=None, Tensor? deq_scale1=None, "
    "Tensor? quant_scale1=None, Tensor? deq_scale2=None, Tensor? quant_scale2=None, Tensor? quant_offset2=None, "
    'int num_heads=1, float scale_value=1.0, int pre_tokens=2147483647, int next_tokens=0, str input_layout="BSH", '
    "int num_key_value_heads=0, int[]? actual_seq_lengths_kv=None, int sparse_mode=0) -> Tensor",
)(npu_prompt_flash_attention)


def npu_incre_flash_attention(
    query,
    key,
    value,
    *,
    padding_mask=None,
    atten_mask=None,
    pse_shift=None,
    actual_seq_lengths=None,
    antiquant_scale=None,
    antiquant_offset=None,
    block_table=None,
    dequant_scale1=None,
    quant_scale1=None,
    dequant_scale2=None,
    quant_scale2=None,
    quant_offset2=None,
    kv_padding_size=None,
    num_heads=1,
    scale_value=1.0,
    input_layout="BSH",
    num_key_value_heads=0,
    block_size=0,
    inner_precise=1,
):
    """Decode attention: one query token per batch; actual_seq_lengths are the valid KV lengths. An int8 KV
    cache is dequantised with antiquant_scale/offset [2, ...] (key, value): per channel, or per token when
    shaped [2, B, S_kv]; int8 attention and output as npu_prompt_flash_attention (attention_quant.py)."""
    op = "npu_incre_flash_attention"
    if antiquant_scale is not None:
        (key_params, value_params) = split_antiquant(antiquant_scale, antiquant_offset, op)
        kv_tokens = key.shape[:2] if input_layout != "BNSD" else (key.shape[0], key.shape[2])
        mode = 1 if antiquant_scale.dim() == 3 and tuple(antiquant_scale.shape[1:]) == tuple(kv_tokens) else 0
        key, value = _dequantised(op, key, value, input_layout, query.dtype, key_params, value_params, mode, mode)
    out, _ = _infer_attention(
        op,
        query,
        key,
        value,
        pse_shift=pse_shift,
        atten_mask=atten_mask,
        actual_seq_lengths=None,
        actual_seq_lengths_kv=actual_seq_lengths,
        block_table=block_table,
        num_heads=num_heads,
        scale=scale_value,
        pre_tokens=_BIG,
        next_tokens=_BIG,
        input_layout=input_layout,
        num_key_value_heads=num_key_value_heads,
        sparse_mode=0,
        block_size=block_size,
        int8_scales=_int8_scales(op, dequant_scale1, quant_scale1, dequant_scale2),
    )
    return _quantised_output(op, out, input_layout, quant_scale2, quant_offset2)


npu_op(
    "npu_incre_flash_attention(Tensor query, Tensor key, Tensor value, *, Tensor? padding_mask=None, "
    "Tensor? atten_mask=None, Tensor? pse_shift=None, SymInt[]? actual_seq_lengths=None, "
    "Tensor? antiquant_scale=None, Tensor? antiquant_offset=None, Tensor? block_table=None, "
    "Tensor? dequant_scale1=None, Tensor? quant_scale1=None, Tensor? dequant_scale2=None, "
    "Tensor? quant_scale2=None, Tensor? quant_offset2=None, Tensor? kv_padding_size=None, int num_heads=1, "
    'float scale_value=1.0, str input_layout="BSH", int num_key_value_heads=0, int block_size=0, '
    "int inner_precise=1) -> Tensor",
    # torch_npu's meta rule: int8 out with quant_scale2, float16 out of an int8 query, else the query's dtype.
    fake=lambda query, key, value, *, quant_scale2=None, **kw: torch.empty_like(
        query,
        dtype=torch.int8 if quant_scale2 is not None else torch.float16 if query.dtype == torch.int8 else query.dtype,
    ),
)(npu_incre_flash_attention)


def npu_fused_infer_attention_score(
    query,
    key,
    value,
    *,
    pse_shift=None,
    atten_mask=None,
    actual_seq_lengths=None,
    actual_seq_lengths_kv=None,
    dequant_scale1=None,
    quant_scale1=None,
    dequant_scale2=None,
    quant_scale2=None,
    quant_offset2=None,
    antiquant_scale=None,
    antiquant_offset=None,
    key_antiquant_scale=None,
    key_antiquant_offset=None,
    value_antiquant_scale=None,
    value_antiquant_offset=None,
    block_table=None,
    query_padding_size=None,
    kv_padding_size=None,
    key_shared_prefix=None,
    value_shared_prefix=None,
    actual_shared_prefix_len=None,
    query_rope=None,
    key_rope=None,
    key_rope_antiquant_scale=None,
    num_heads=1,
    scale=1.0,
    pre_tokens=_BIG,
    next_tokens=_BIG,
    input_layout="BSH",
    num_key_value_heads=0,
    sparse_mode=0,
    inner_precise=0,
    block_size=0,
    antiquant_mode=0,
    key_antiquant_mode=0,
    value_antiquant_mode=0,
    softmax_lse_flag=False,
):
    """Prefill (query length > 1) or decode attention in one operator; returns (attention_out,
    softmax_lse), softmax_lse float32 [B, N, S1, 1] (TND: [T, N, 1]) when softmax_lse_flag, else one element.
    query_rope/key_rope (MLA): their dot products are added to the scores. Quantisation (attention_quant.py):
    antiquant_scale/offset [2, ...] with antiquant_mode, or key_/value_antiquant_scale/offset with their own
    modes (0 per channel, 1 per token); int8 attention and output as npu_prompt_flash_attention."""
    op = "npu_fused_infer_attention_score"
    _unsupported(
        op,
        key_shared_prefix=key_shared_prefix,
        value_shared_prefix=value_shared_prefix,
        key_rope_antiquant_scale=key_rope_antiquant_scale,
    )
    if antiquant_scale is not None:
        key_params, value_params = split_antiquant(antiquant_scale, antiquant_offset, op)
        key, value = _dequantised(
            op, key, value, input_layout, query.dtype, key_params, value_params, antiquant_mode, antiquant_mode
        )
    elif key_antiquant_scale is not None or value_antiquant_scale is not None:
        key, value = _dequantised(
            op,
            key,
            value,
            input_layout,
            query.dtype,
            (key_antiquant_scale, key_antiquant_offset),
            (value_antiquant_scale, value_antiquant_offset),
            key_antiquant_mode,
            value_antiquant_mode,
        )
    if query_rope is not None:
        query, key = with_rope(
            op, query, query_rope, key, key_rope, input_layout, num_heads, num_key_value_heads, block_table is not None
        )
    out, lse = _infer_attention(
        op,
        query,
        key,
        value,
        pse_shift=pse_shift,
        atten_mask=atten_mask,
        actual_seq_lengths=actual_seq_lengths,
        actual_seq_lengths_kv=actual_seq_lengths_kv,
        block_table=block_table,
        num_heads=num_heads,
        scale=scale,
        pre_tokens=pre_tokens,
        next_tokens=next_tokens,
        input_layout=input_layout,
        num_key_value_heads=num_key_value_heads,
        sparse_mode=sparse_mode,
        block_size=block_size,
        int8_scales=_int8_scales(op, dequant_scale1, quant_scale1, dequant_scale2),
    )
    out = _quantised_output(op, out, input_layout, quant_scale2, quant_offset2)
    # Not requested, softmax_lse is the one-element placeholder op-plugin's kernel allocates (unwritten on the card,
    # zero here).
    return out, (lse if softmax_lse_flag else out.new_zeros(1, dtype=torch.float32))


npu_op(
    "npu_fused_infer_attention_score(Tensor query, Tensor key, Tensor value, *, Tensor? pse_shift=None, "
    "Tensor? atten_mask=None, SymInt[]? actual_seq_lengths=None, SymInt[]? actual_seq_lengths_kv=None, "
    "Tensor? dequant_scale1=None, Tensor? quant_scale1=None, Tensor? dequant_scale2=None, "
    "Tensor? quant_scale2=None, Tensor? quant_offset2=None, Tensor? antiquant_scale=None, "
    "Tensor? antiquant_offset=None, Tensor? key_antiquant_scale=None, Tensor? key_antiquant_offset=None, "
    "Tensor? value_antiquant_scale=None, Tensor? value_antiquant_offset=None, Tensor? block_table=None, "
    "Tensor? query_padding_size=None, Tensor? kv_padding_size=None, Tensor? key_shared_prefix=None, "
    "Tensor? value_shared_prefix=None, SymInt[]? actual_shared_prefix_len=None, Tensor? query_rope=None, "
    "Tensor? key_rope=None, Tensor? key_rope_antiquant_scale=None, int num_heads=1, float scale=1.0, "
    'int pre_tokens=2147483647, int next_tokens=2147483647, str input_layout="BSH", int num_key_value_heads=0, '
    "int sparse_mode=0, int inner_precise=0, int block_size=0, int antiquant_mode=0, int key_antiquant_mode=0, "
    "int value_antiquant_mode=0, bool softmax_lse_flag=False) -> (Tensor, Tensor)",
)(npu_fused_infer_attention_score)
