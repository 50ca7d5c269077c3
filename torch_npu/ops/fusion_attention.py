"""npu_fusion_attention (FlashAttention training operator) and npu_fusion_attention_grad.

out = Dropout(Softmax(Mask(scale * (q @ k^T + pse), atten_mask)), keep_prob) @ v over layouts BSH, SBH,
BSND, BNSD and TND (variable lengths, actual_seq_qlen/kvlen cumulative). Grouped-query attention when
the query has a multiple of the key's heads. sparse_mode:
  0  atten_mask (True = masked) and the band i - pre_tockens <= j <= i + next_tockens;
     without atten_mask every key is attended (torch_npu ignores the band then);
  1  atten_mask as given;  2 / 8 causal aligned at the top left (j <= i);
  3 / 7 causal aligned at the bottom right (j <= i + S2 - S1);
  4  the band of mode 0 without a mask;  5 / 6 prefix: causal at the bottom right, plus the first
     prefix[b] keys of batch b.
Modes 2-4 and 6-8 take their shape from the mode (the compressed mask the NPU needs is not read).
Outputs: (attention_out, softmax_max, softmax_sum, softmax_out, seed, offset, numels); softmax_max and
softmax_sum are float32 [B, N, S1, 8] (TND: [T, N, 8]), 8 copies of one value per row, with
softmax = exp(s - softmax_max) / softmax_sum: softmax_max is the row maximum of the float32 scores and
softmax_sum = exp(logsumexp(s) - softmax_max), so max + log(sum) is exactly the logsumexp PyTorch's fused
CPU kernel's backward takes (it is rebuilt from the pair). softmax_out is empty. With keep_prob < 1
the dropout mask is drawn from `seed` (taken from the npu generator) so npu_fusion_attention_grad
reproduces it. The forward forms the scores a cache-sized block of heads at a time (attention_core.attend_with_stats);
without dropout the backward is PyTorch's fused CPU flash-attention backward kernel.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.attention_core import (
    LAYOUTS,
    as_bool_mask,
    attend_backward,
    attend_with_stats,
    band_mask,
    check_head_sizes,
    cumulative_to_lengths,
    dropout_keep_mask,
    expand_kv,
    from_bnsd,
    to_bnsd,
)
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import recording_gradients

__all__ = ["fusion_attention_fake", "input_grads", "saved_forward_grad"]

OP = "npu_fusion_attention"
_BIG = 2147483647


def _mask_for(atten_mask, sparse_mode, s1, s2, pre, nxt, prefix, batch, device):
    if sparse_mode == 0:
        if atten_mask is None:
            return None
        mask = atten_mask
        if pre < _BIG or nxt < _BIG:
            mask = mask | band_mask(s1, s2, pre, nxt, device)
        return mask
    if sparse_mode == 1:  # allMask: the mask as given; without one nothing is masked, as on the card
        return atten_mask
    if sparse_mode in (2, 8):
        return band_mask(s1, s2, _BIG, 0, device)
    if sparse_mode in (3, 7):
        return band_mask(s1, s2, _BIG, 0, device, shift=s2 - s1)
    if sparse_mode == 4:
        return band_mask(s1, s2, pre, nxt, device)
    if sparse_mode in (5, 6):
        check(prefix is not None and len(prefix) > batch, OP, f"sparse_mode={sparse_mode} needs prefix per batch")
        causal = band_mask(s1, s2, _BIG, 0, device, shift=s2 - s1)
        return causal & (torch.arange(s2, device=device) >= prefix[batch])
    check(False, OP, f"sparse_mode must be in 0..8, got {sparse_mode}")


def _batched_mask(atten_mask, sparse_mode, b, s1, s2, pre, nxt, prefix, device):
    if atten_mask is not None and atten_mask.dim() == 2:
        atten_mask = atten_mask.view(1, 1, *atten_mask.shape)
    if sparse_mode in (5, 6):
        return torch.stack(
            [_mask_for(None, sparse_mode, s1, s2, pre, nxt, prefix, i, device) for i in range(b)]
        ).unsqueeze(1)
    if sparse_mode in (0, 1) and atten_mask is not None:
        check(
            atten_mask.shape[-2:] == (s1, s2),
            OP,
            f"atten_mask must end in [S1, S2] = [{s1}, {s2}], got {tuple(atten_mask.shape)}",
        )
    return _mask_for(atten_mask, sparse_mode, s1, s2, pre, nxt, prefix, 0, device)


def _check_layout(layout):
    check(layout in LAYOUTS, OP, f"input_layout must be one of {LAYOUTS}, got {layout!r}")


def _stats(row_max, row_sum):
    """(softmax_max, softmax_sum): 8 copies per row."""
    return tuple(stat.expand(*stat.shape[:-1], 8).contiguous() for stat in (row_max, row_sum))


def _bnsd_inputs(query, key, value, head_num, input_layout):
    q = to_bnsd(query, input_layout, head_num, OP, "query")
    check(q.shape[1] == head_num, OP, f"head_num={head_num} does not match the query's {q.shape[1]} heads")
    kv_heads = key.shape[-1] // q.shape[-1] if input_layout in ("BSH", "SBH") else 1
    check(kv_heads > 0, OP, f"key's hidden size {key.shape[-1]} is smaller than the head size {q.shape[-1]}")
    k = to_bnsd(key, input_layout, kv_heads, OP, "key")
    v = to_bnsd(value, input_layout, kv_heads, OP, "value")
    check_head_sizes(q, k, OP)
    check(q.shape[0] == k.shape[0], OP, f"query and key batch sizes differ ({q.shape[0]} vs {k.shape[0]})")
    return q, k, v


def _forward(
    query,
    key,
    value,
    head_num,
    input_layout,
    pse,
    atten_mask,
    scale,
    keep_prob,
    pre,
    nxt,
    prefix,
    actual_seq_qlen,
    actual_seq_kvlen,
    sparse_mode,
    seed,
    dropout_mask,
    sink=None,
):
    """attention_out (in input_layout), softmax_max, softmax_sum."""
    _check_layout(input_layout)
    check(
        sink is None or sink.numel() == head_num,
        OP,
        f"sink must hold one value per query head ({head_num}), got {None if sink is None else tuple(sink.shape)}",
    )
    check(head_num > 0, OP, f"head_num must be positive, got {head_num}")
    check(0.0 < keep_prob <= 1.0, OP, f"keep_prob must be in (0, 1], got {keep_prob}")
    mask = as_bool_mask(atten_mask, OP)
    if input_layout == "TND":
        return _forward_tnd(
            query,
            key,
            value,
            head_num,
            mask,
            scale,
            keep_prob,
            pre,
            nxt,
            actual_seq_qlen,
            actual_seq_kvlen,
            sparse_mode,
            seed,
            dropout_mask,
            sink,
        )
    q, k, v = _bnsd_inputs(query, key, value, head_num, input_layout)
    k, v = expand_kv(k, v, head_num, OP)
    b, _, s1, _ = q.shape
    s2 = k.shape[2]
    full_mask = _batched_mask(mask, sparse_mode, b, s1, s2, pre, nxt, prefix, q.device)
    drop = None
    if keep_prob < 1.0:
        drop = (
            dropout_mask.to(torch.bool)
            if dropout_mask is not None
            else dropout_keep_mask((b, head_num, s1, s2), keep_prob, seed, q.device)
        )
    out, row_max, row_sum = attend_with_stats(
        q, k, v, scale=scale, mask=full_mask, pse=pse, keep_prob=keep_prob, dropout_mask=drop, sink=sink
    )
    return (from_bnsd(out, input_layout), *_stats(row_max, row_sum))


def _forward_tnd(
    query,
    key,
    value,
    head_num,
    mask,
    scale,
    keep_prob,
    pre,
    nxt,
    actual_seq_qlen,
    actual_seq_kvlen,
    sparse_mode,
    seed,
    dropout_mask,
    sink=None,
):
    check(
        query.dim() == 3 and query.shape[1] == head_num,
        OP,
        f"TND query must be [T, {head_num}, D], got {tuple(query.shape)}",
    )
    q_lens = cumulative_to_lengths(actual_seq_qlen, OP, "actual_seq_qlen")
    kv_lens = cumulative_to_lengths(actual_seq_kvlen, OP, "actual_seq_kvlen")
    check(len(q_lens) == len(kv_lens), OP, "actual_seq_qlen and actual_seq_kvlen must list as many sequences")
    check(
        sum(q_lens) == query.shape[0] and sum(kv_lens) == key.shape[0],
        OP,
        f"the sequence lengths cover {sum(q_lens)} / {sum(kv_lens)} tokens, query/key hold "
        f"{query.shape[0]} / {key.shape[0]}",
    )
    outs, maxima, sums = [], [], []
    q_start = kv_start = 0
    for i, (sq, skv) in enumerate(zip(q_lens, kv_lens)):
        q = query[q_start : q_start + sq].transpose(0, 1).unsqueeze(0)
        k = key[kv_start : kv_start + skv].transpose(0, 1).unsqueeze(0)
        v = value[kv_start : kv_start + skv].transpose(0, 1).unsqueeze(0)
        k, v = expand_kv(k, v, head_num, OP)
        seq_mask = mask[..., :sq, :skv] if mask is not None and mask.dim() >= 2 else mask
        m = _mask_for(seq_mask, sparse_mode, sq, skv, pre, nxt, None, i, q.device)
        drop = None
        if keep_prob < 1.0:
            drop = dropout_keep_mask((1, head_num, sq, skv), keep_prob, seed + i, q.device)
        out, *stats = attend_with_stats(q, k, v, scale=scale, mask=m, keep_prob=keep_prob, dropout_mask=drop, sink=sink)
        outs.append(out[0].transpose(0, 1))
        row_max, row_sum = _stats(*stats)
        maxima.append(row_max[0].transpose(0, 1))
        sums.append(row_sum[0].transpose(0, 1))
        q_start, kv_start = q_start + sq, kv_start + skv
    return torch.cat(outs), torch.cat(maxima), torch.cat(sums)


def _dropout_numels(query, key, head_num, layout, actual_seq_qlen, actual_seq_kvlen):
    """Elements of the dropout mask: B * N * S1 * S2 (TND: N * sum of S1 * S2 per sequence)."""
    if layout == "TND":
        q_lens = cumulative_to_lengths(actual_seq_qlen, OP, "actual_seq_qlen")
        kv_lens = cumulative_to_lengths(actual_seq_kvlen, OP, "actual_seq_kvlen")
        return head_num * sum(a * b for a, b in zip(q_lens, kv_lens))
    q, k, _ = _bnsd_inputs(query, key, key, head_num, layout)
    return q.shape[0] * head_num * q.shape[2] * k.shape[2]


def _draw_seed(keep_prob, device):
    if keep_prob >= 1.0:
        return 0
    return int(torch.randint(0, 2**31 - 1, (1,), device=device).item())


def npu_fusion_attention(
    query,
    key,
    value,
    head_num,
    input_layout,
    pse=None,
    padding_mask=None,
    atten_mask=None,
    scale=1.0,
    keep_prob=1.0,
    pre_tockens=_BIG,
    next_tockens=_BIG,
    inner_precise=0,
    prefix=None,
    actual_seq_qlen=None,
    actual_seq_kvlen=None,
    sparse_mode=0,
    gen_mask_parallel=True,
    sync=False,
    softmax_layout="",
    sink=None,
    dropout_mask=None,
    seed=0,
    offset=0,
):
    seed = seed if seed else _draw_seed(keep_prob, query.device)
    out, softmax_max, softmax_sum = _forward(
        query,
        key,
        value,
        head_num,
        input_layout,
        pse,
        atten_mask,
        scale,
        keep_prob,
        pre_tockens,
        next_tockens,
        prefix,
        actual_seq_qlen,
        actual_seq_kvlen,
        sparse_mode,
        seed,
        dropout_mask,
        sink,
    )
    numels = (
        _dropout_numels(query, key, head_num, input_layout, actual_seq_qlen, actual_seq_kvlen) if keep_prob < 1.0 else 0
    )
    return out, softmax_max, softmax_sum, query.new_empty(0), seed, offset, numels


def fusion_attention_fake(query, key, value, head_num, input_layout, *args, **kwargs):
    _check_layout(input_layout)
    if input_layout == "TND":
        stats_shape = (query.shape[0], head_num, 8)
    else:
        q = to_bnsd(query, input_layout, head_num, OP, "query")
        stats_shape = (q.shape[0], head_num, q.shape[2], 8)
    out_width = (
        value.shape[-1]
        if input_layout in ("BNSD", "BSND", "TND")
        else value.shape[-1] * head_num // max(key.shape[-1] // (query.shape[-1] // head_num), 1)
    )
    out = query.new_empty(*query.shape[:-1], out_width)
    return (
        out,
        query.new_empty(stats_shape, dtype=torch.float32),
        query.new_empty(stats_shape, dtype=torch.float32),
        query.new_empty(0),
        0,
        0,
        0,
    )


_ARG_NAMES = (
    "query",
    "key",
    "value",
    "head_num",
    "input_layout",
    "pse",
    "padding_mask",
    "atten_mask",
    "scale",
    "keep_prob",
    "pre_tockens",
    "next_tockens",
    "inner_precise",
    "prefix",
    "actual_seq_qlen",
    "actual_seq_kvlen",
    "sparse_mode",
    "gen_mask_parallel",
    "sync",
    "softmax_layout",
    "sink",
    "dropout_mask",
    "seed",
    "offset",
)


def _setup(ctx, inputs, output, keyword_only_inputs=None):
    ctx.args = dict(zip(_ARG_NAMES, inputs))
    # outputs go through save_for_backward: kept as ctx attributes they would form a cycle with this node that
    # Python's collector cannot break, and every step's attention output would leak
    ctx.save_for_backward(output[0], output[1], output[2])
    ctx.seed = output[4]


def saved_forward_grad(ctx, query, key, value, dout, head_num, input_layout, options):
    """(dq, dk, dv, dpse, dsink) of a forward whose ctx saved out, softmax_max, softmax_sum (save_for_backward) and the seed;
    options holds npu_fusion_attention's arguments by name."""
    out, softmax_max, softmax_sum = ctx.saved_tensors
    dq, dk, dv, dpse, dsink = torch.ops.npu.npu_fusion_attention_grad(
        query,
        key,
        value,
        dout,
        head_num,
        input_layout,
        pse=options["pse"],
        atten_mask=options["atten_mask"],
        softmax_max=softmax_max,
        softmax_sum=softmax_sum,
        attention_in=out,
        scale_value=options["scale"],
        keep_prob=options["keep_prob"],
        pre_tockens=options["pre_tockens"],
        next_tockens=options["next_tockens"],
        seed=ctx.seed,
        prefix=options["prefix"],
        actual_seq_qlen=options["actual_seq_qlen"],
        actual_seq_kvlen=options["actual_seq_kvlen"],
        sparse_mode=options["sparse_mode"],
        sink=options["sink"],
    )
    return dq, dk, dv, dpse, dsink


def _backward(ctx, dout, *unused):
    a = ctx.args
    dq, dk, dv, dpse, dsink = saved_forward_grad(
        ctx, a["query"], a["key"], a["value"], dout, a["head_num"], a["input_layout"], a
    )
    return input_grads(_ARG_NAMES, a, dq, dk, dv, dpse, dsink)


def input_grads(names, args, dq, dk, dv, dpse, dsink):
    """The gradients of a fusion-attention call's inputs, by argument position (names), for autograd."""
    grads = [None] * len(names)
    grads[0], grads[1], grads[2] = dq, dk, dv
    for name, grad in (("pse", dpse), ("sink", dsink)):
        if args[name] is not None:
            grads[names.index(name)] = grad
    return tuple(grads)


npu_op(
    "npu_fusion_attention(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, "
    "Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, float scale=1., float keep_prob=1., "
    "int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, int[]? prefix=None, "
    "int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, "
    'bool sync=False, str softmax_layout="", Tensor? sink=None, Tensor? dropout_mask=None, int seed=0, '
    "int offset=0) -> (Tensor, Tensor, Tensor, Tensor, int, int, int)",
    fake=fusion_attention_fake,
    backward=_backward,
    setup_context=_setup,
)(npu_fusion_attention)


def npu_fusion_attention_grad(
    query,
    key,
    value,
    dy,
    head_num,
    input_layout,
    *,
    pse=None,
    padding_mask=None,
    atten_mask=None,
    softmax_max=None,
    softmax_sum=None,
    softmax_in=None,
    attention_in=None,
    scale_value=1.0,
    keep_prob=1.0,
    pre_tockens=_BIG,
    next_tockens=_BIG,
    inner_precise=0,
    seed=0,
    offset=0,
    numels=0,
    prefix=None,
    actual_seq_qlen=None,
    actual_seq_kvlen=None,
    sparse_mode=0,
    gen_mask_parallel=True,
    sync=False,
    softmax_layout="",
    sink=None,
):
    """(dq, dk, dv, dpse, dsink) of npu_fusion_attention for the output gradient dy (the dropout mask is
    regenerated from seed; dpse / dsink are empty when pse / sink are not given). Given the forward's
    attention_in and softmax_max / softmax_sum, without dropout and pse, PyTorch's fused CPU
    flash-attention backward runs; otherwise the forward is recomputed and differentiated."""
    fast = (
        attention_in is not None
        and softmax_max is not None
        and softmax_sum is not None
        and keep_prob >= 1.0
        and pse is None
        and input_layout != "TND"
        and key.shape[-1] == value.shape[-1]  # the fused kernel needs one head size (rope parts make Q/K wider)
    )
    if fast:
        grads = _fast_grad(
            query,
            key,
            value,
            dy,
            head_num,
            input_layout,
            atten_mask,
            softmax_max,
            softmax_sum,
            attention_in,
            scale_value,
            pre_tockens,
            next_tockens,
            prefix,
            sparse_mode,
        )
        dsink = _sink_grad(dy, attention_in, softmax_max, softmax_sum, sink, head_num, input_layout)
        return (*grads[:4], dsink)
    leaves = [t.detach().requires_grad_(True) for t in (query, key, value)]
    pse_leaf = pse.detach().requires_grad_(True) if pse is not None else None
    sink_leaf = sink.detach().float().requires_grad_(True) if sink is not None else None
    with recording_gradients():
        out, _, _ = _forward(
            *leaves,
            head_num,
            input_layout,
            pse_leaf,
            atten_mask,
            scale_value,
            keep_prob,
            pre_tockens,
            next_tockens,
            prefix,
            actual_seq_qlen,
            actual_seq_kvlen,
            sparse_mode,
            seed,
            None,
            sink_leaf,
        )
        extra = [t for t in (pse_leaf, sink_leaf) if t is not None]
        grads = torch.autograd.grad(out, leaves + extra, dy, allow_unused=True)
    dq, dk, dv = (g if g is not None else torch.zeros_like(t) for g, t in zip(grads[:3], (query, key, value)))
    dpse = grads[3] if pse is not None else query.new_empty(0)
    dsink = grads[-1].to(sink.dtype) if sink is not None else query.new_empty(0)
    return dq, dk, dv, dpse, dsink


def _sink_grad(dy, attention_in, softmax_max, softmax_sum, sink, head_num, layout):
    """d loss / d sink[n] = -sum over rows of p_sink * rowsum(dy * out), p_sink = exp(sink - lse) the sink's
    share of each row's softmax (the sink's value is zero)."""
    if sink is None:
        return dy.new_empty(0)
    if layout == "TND":  # [T, N, D] rows, stats [T, N, 8]
        d = (dy.float() * attention_in.float()).sum(-1)
        lse = softmax_max[..., 0] + torch.log(softmax_sum[..., 0])
        share = torch.exp(sink.float().view(1, -1) - lse)
        return (-(share * d).sum(0)).to(sink.dtype)
    dout = to_bnsd(dy, layout, head_num, OP, "dy").float()
    out = to_bnsd(attention_in, layout, head_num, OP, "attention_in").float()
    lse = softmax_max[..., 0] + torch.log(softmax_sum[..., 0])  # [B, N, S1]
    share = torch.exp(sink.float().view(1, -1, 1) - lse)
    return (-(share * (dout * out).sum(-1)).sum((0, 2))).to(sink.dtype)


def _fast_grad(
    query,
    key,
    value,
    dy,
    head_num,
    layout,
    atten_mask,
    softmax_max,
    softmax_sum,
    attention_in,
    scale,
    pre,
    nxt,
    prefix,
    sparse_mode,
):
    q, k, v = _bnsd_inputs(query, key, value, head_num, layout)
    kv_heads = k.shape[1]
    k_e, v_e = expand_kv(k, v, head_num, OP)
    b, _, s1, _ = q.shape
    mask = _batched_mask(as_bool_mask(atten_mask, OP), sparse_mode, b, s1, k.shape[2], pre, nxt, prefix, q.device)
    lse = softmax_max[..., :1] + torch.log(softmax_sum[..., :1])
    dout = to_bnsd(dy, layout, head_num, OP, "dy")
    out = to_bnsd(attention_in, layout, head_num, OP, "attention_in")
    dq, dk, dv = attend_backward(dout, q, k_e, v_e, out, lse, scale=scale, mask=mask)
    if kv_heads != head_num:
        group = head_num // kv_heads
        dk = dk.view(b, kv_heads, group, *dk.shape[2:]).sum(2)
        dv = dv.view(b, kv_heads, group, *dv.shape[2:]).sum(2)
    return (from_bnsd(dq, layout), from_bnsd(dk, layout), from_bnsd(dv, layout), query.new_empty(0), query.new_empty(0))


def _grad_fake(query, key, value, dy, head_num, input_layout, *, pse=None, **kwargs):
    return (
        torch.empty_like(query),
        torch.empty_like(key),
        torch.empty_like(value),
        torch.empty_like(pse) if pse is not None else query.new_empty(0),
        torch.empty_like(kwargs["sink"]) if kwargs.get("sink") is not None else query.new_empty(0),
    )


npu_op(
    "npu_fusion_attention_grad(Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, "
    "str input_layout, *, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, "
    "Tensor? softmax_max=None, Tensor? softmax_sum=None, Tensor? softmax_in=None, Tensor? attention_in=None, "
    "float scale_value=1., float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, "
    "int inner_precise=0, int seed=0, int offset=0, int numels=0, int[]? prefix=None, "
    "int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, "
    'bool sync=False, str softmax_layout="", Tensor? sink=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)',
    fake=_grad_fake,
)(npu_fusion_attention_grad)
