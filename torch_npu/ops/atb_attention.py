"""op-plugin's ATB attention operators that inference engines call (torch.ops.atb.*, also torch_npu.<name>):
_npu_paged_attention (decode over a paged KV cache), _npu_paged_attention_quant (the same over int8 caches),
_npu_paged_attention_get_workspace, _npu_paged_attention_splitfuse (chunked prefill: each sequence's new tokens
attend to its cached context and to each other), _npu_flash_attention (prefill of variable-length sequences packed together),
_npu_flash_attention_unpad / _unpad_v2 (the same without a mask) and _npu_flash_attention_v3 (the same, causal).

They compute as the card's kernels do: scores q·kᵀ in float32 times scale_value, softmax in float32, the
probabilities rounded to the input dtype, then p·v accumulated in float32 and rounded to the output's dtype;
num_heads query heads share num_kv_heads key/value heads in groups. Paged attention reads every sequence's
blocks through block_table and masks the positions at or past its context length on the device, so it needs no
host read and can be captured in an NPU graph (context_lens may be on the host or the device); a sequence of
length 0 gets zeros."""

import torch

from torch_npu.ops._common import check, require
from torch_npu.ops.registration import npu_op

__all__ = []


def _grouped(t, kv_heads, op):
    """[..., heads, D] -> [..., kv_heads, heads / kv_heads, D]."""
    heads = t.shape[-2]
    check(kv_heads > 0 and heads % kv_heads == 0, op, f"num_heads {heads} is not a multiple of num_kv_heads {kv_heads}")
    return t.unflatten(-2, (kv_heads, heads // kv_heads))


def sequence_rows(key_cache, value_cache, block_table):
    """Every sequence's cache rows in order, through its blocks: keys [B, blocks * block_size, KV, D], values."""
    table = block_table.long().flatten()
    batch = block_table.shape[0]
    keys = key_cache.index_select(0, table).reshape(batch, -1, *key_cache.shape[2:])
    return keys, value_cache.index_select(0, table).reshape(batch, -1, *value_cache.shape[2:])


def _writes_out_only(*args, **kwargs):
    """The fake kernel of the operators that read lengths on the host: they return nothing and write `out`."""


def _probabilities(scores, dtype):
    return torch.softmax(scores, dim=-1).to(dtype).float()


def paged_decode(
    query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table, context_lens, out, op,
    dequantise=None, online_quant=None, bias=None,
):  # fmt: skip
    """One query token per sequence over its first context_lens[i] cache rows, masked on the device.
    dequantise(keys, values) turns int8 cache rows into float32 ones; online_quant = (per-head key scales, per-head
    value scales) computes as ATB's online QKV quantisation (_decode_online_quant); bias [batch, num_heads or 1,
    1, max_len] is added to the scaled scores (an ALiBi mask)."""
    check(query.dim() == 3 and query.shape[1] == num_heads, op, f"query must be [batch, {num_heads}, head_size]")
    check(key_cache.dim() == 4 and value_cache.dim() == 4, op, "key_cache and value_cache must be 4-D")
    check(key_cache.shape[2] == num_kv_heads, op, f"key_cache has {key_cache.shape[2]} heads, not {num_kv_heads}")
    keys, values = sequence_rows(key_cache, value_cache, block_table)
    keys, values = dequantise(keys, values) if dequantise is not None else (keys.float(), values.float())
    decode_rows(query, keys, values, context_lens, num_kv_heads, scale_value, out, op, online_quant, bias)


def decode_rows(query, keys, values, context_lens, num_kv_heads, scale_value, out, op, online_quant=None, bias=None):
    """paged_decode over gathered float32 rows (keys [batch, L, KV, D], values [batch, L, KV, Dv]); returns each
    head's log-sum-exp of its scaled scores [batch, num_heads, 1] (float32; -inf for an empty sequence)."""
    batch = query.shape[0]
    lengths = context_lens.to(device=query.device, dtype=torch.long).reshape(batch, 1, 1, 1)
    masked = torch.arange(keys.shape[1], device=query.device) >= lengths
    q = _grouped(query, num_kv_heads, op).float()  # [B, KV, G, D]
    scores = torch.einsum("bhgd,blhd->bhgl", q, keys)
    if online_quant is not None:
        result = _decode_online_quant(scores, values, masked, scale_value, *online_quant, num_kv_heads)
        lse = None
    else:
        scores = scores * scale_value
        if bias is not None:
            scores = scores + _padded_bias(bias, scores.shape, num_kv_heads)
        scores = scores.masked_fill(masked, float("-inf"))
        p = _probabilities(scores, query.dtype)
        result = torch.einsum("bhgl,blhd->bhgd", p.nan_to_num(0.0), values).flatten(1, 2)
        lse = torch.logsumexp(scores, dim=-1, keepdim=True).flatten(1, 2)
    out.copy_(torch.where(lengths.reshape(batch, 1, 1) > 0, result, 0.0).to(out.dtype))
    return lse


def _padded_bias(bias, shape, kv_heads):
    """An ALiBi mask [batch, heads or 1, 1, max_len] (or [batch, 1, max_len]) as [batch, KV, G, L] float32, zero past
    max_len (those positions are masked by length anyway)."""
    batch, _, _, length = shape
    bias = bias.float().reshape(batch, -1, bias.shape[-1])[..., :length]
    bias = torch.nn.functional.pad(bias, (0, length - bias.shape[-1]))
    return bias.reshape(batch, kv_heads, -1, length) if bias.shape[1] > 1 else bias.reshape(batch, 1, 1, length)


def _decode_online_quant(scores, values, masked, scale_value, key_scale, value_scale, kv_heads):
    """ATB's online QKV quantisation: int8 q·k (exact in float32) times each head's key scale and scale_value;
    p = exp(s - max) quantised to int8 against its row maximum (p / (max / 127), rounded in float16), p·v in
    integers, times the head's value scale and max / 127, over the row sum of p."""
    per_head = lambda scale: scale.float().reshape(1, kv_heads, -1, 1)  # noqa: E731
    s = (scores * per_head(key_scale) * scale_value).masked_fill(masked, float("-inf"))
    p = torch.exp(s - s.amax(-1, keepdim=True))
    row_max = p.amax(-1, keepdim=True)
    p_int8 = torch.round((p / (row_max / 127.0)).half().float())
    result = torch.einsum("bhgl,blhd->bhgd", p_int8, values) * (per_head(value_scale) * row_max / 127.0)
    return (result / p.sum(-1, keepdim=True)).flatten(1, 2)


def _attend(query, keys, values, bias, num_kv_heads, scale_value, op):
    """query [S, N, D] against keys / values [T, KV, D(v)] of one sequence, `bias` [S, T] (or per head [N, S, T])
    added to the scores: [S, N, Dv] in float32."""
    q = _grouped(query, num_kv_heads, op).float()  # [S, KV, G, D]
    bias = bias.float() if bias.dim() == 2 else bias.float().unflatten(0, (num_kv_heads, -1))
    scores = torch.einsum("shgd,thd->hgst", q, keys.float()) * scale_value + bias
    p = _probabilities(scores, query.dtype)
    return torch.einsum("hgst,thd->shgd", p, values.float()).flatten(1, 2)


_PAGED_ARGS = (
    "Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, int num_heads, float scale_value, "
    "Tensor block_table, Tensor context_lens, Tensor(a!) out"
)


@npu_op(f"atb::_npu_paged_attention({_PAGED_ARGS}, *, Tensor? workspace=None) -> ()")
def _npu_paged_attention(*args, workspace=None):
    """Decode attention (the schema's arguments in order): query [batch, num_heads, D], key_cache
    [blocks, block_size, num_kv_heads, D], value_cache [blocks, block_size, num_kv_heads, Dv], block_table
    [batch, max_blocks] (int32), context_lens [batch]; writes out [batch, num_heads, Dv]. `workspace` (from
    _npu_paged_attention_get_workspace) is accepted; vnpu's kernel needs none."""
    paged_decode(*args, "_npu_paged_attention")


_OUT_DTYPES = {1: torch.float16, 27: torch.bfloat16}  # aclDataType numbers of the outputs ATB writes


def float_scales(scale):
    """Dequantisation scales as float32: given so, or in ATB's int64 form (a float32's bits in the low word)."""
    if scale.dtype == torch.int64:
        scale = (scale & 0xFFFFFFFF).to(torch.int32).view(torch.float32)
    return scale.float()


def _channel_scales(scale, kv_heads):
    """Per-channel dequantisation scales [kv_heads, head_size] (float_scales)."""
    return float_scales(scale).reshape(kv_heads, -1)


@npu_op(
    "atb::_npu_paged_attention_quant(Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, "
    "int num_heads, float scale_value, Tensor block_table, Tensor context_lens, int quant_type, int outdata_type, "
    "Tensor k_descale, Tensor v_descale, Tensor(a!) out) -> ()"
)
def _npu_paged_attention_quant(
    query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table, context_lens, quant_type,
    outdata_type, k_descale, v_descale, out,
):  # fmt: skip
    """_npu_paged_attention over int8 caches. quant_type 1 (dequantisation fused): 16-bit queries, the cache rows
    times per-channel scales k_descale / v_descale [num_kv_heads * head_size]; quant_type 3 (online QKV
    quantisation): int8 queries too, k_descale / v_descale per query head [num_heads], the probabilities
    quantised to int8 on the fly. outdata_type names out's dtype (1 float16, 27 bfloat16)."""
    op = "_npu_paged_attention_quant"
    check(quant_type in (1, 3), op, f"quant_type must be 1 (dequantisation fused) or 3 (online QKV quantisation), got {quant_type}")  # fmt: skip
    check(_OUT_DTYPES.get(outdata_type) == out.dtype, op, f"outdata_type {outdata_type} does not name out's dtype {out.dtype}")  # fmt: skip
    args = (query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table, context_lens, out, op)
    if quant_type == 3:
        paged_decode(*args, online_quant=(k_descale, v_descale))
        return
    k_scale, v_scale = _channel_scales(k_descale, num_kv_heads), _channel_scales(v_descale, num_kv_heads)
    paged_decode(*args, dequantise=lambda keys, values: (keys.float() * k_scale, values.float() * v_scale))


@npu_op(f"atb::_npu_paged_attention_get_workspace({_PAGED_ARGS}) -> Tensor")
def _npu_paged_attention_get_workspace(
    query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table, context_lens, out
):
    """The workspace _npu_paged_attention takes: the card's kernel asks ATB for its size; vnpu's needs none, so
    it is an empty uint8 tensor on the query's device."""
    return torch.empty(0, dtype=torch.uint8, device=query.device)


def packed_prefill(query, key, value, seq_len, scale_value, num_heads, num_kv_heads, out, op, bias_of):
    """Attention within each of the sequences packed along the token axis (lengths seq_len, read on the host),
    bias_of(index, length) [length, length] added to each one's scores."""
    check(query.dim() == 3 and query.shape[1] == num_heads, op, f"query must be [tokens, {num_heads}, head_size]")
    check(key.shape[1] == num_kv_heads, op, f"key has {key.shape[1]} heads, not {num_kv_heads}")
    lengths = [int(n) for n in seq_len.cpu().tolist()]
    check(sum(lengths) == query.shape[0], op, f"seq_len sums to {sum(lengths)}, the query has {query.shape[0]} tokens")
    start = 0
    for index, length in enumerate(lengths):
        rows = slice(start, start + length)
        bias = bias_of(index, length)
        out[rows] = _attend(query[rows], key[rows], value[rows], bias, num_kv_heads, scale_value, op).to(out.dtype)
        start += length


@npu_op(
    "atb::_npu_flash_attention(Tensor query, Tensor key, Tensor value, Tensor mask, Tensor seq_len, "
    "float scale_value, int num_heads, int num_kv_heads, Tensor(a!) out) -> ()",
    fake=_writes_out_only,
)
def _npu_flash_attention(query, key, value, mask, seq_len, scale_value, num_heads, num_kv_heads, out):
    """Prefill attention of sequences packed along the token axis: query [tokens, num_heads, D], key/value
    [tokens, num_kv_heads, D], seq_len [batch] (their lengths); `mask` is added to each sequence's scores
    (its top-left [len, len], from a [max_len, max_len] or per-sequence [batch, max_len, max_len] mask, e.g. a
    causal mask of -inf / the dtype's minimum above the diagonal). Writes out [tokens, num_heads, D]."""

    def bias_of(index, length):
        return (mask[index] if mask.dim() == 3 else mask)[:length, :length]

    packed_prefill(query, key, value, seq_len, scale_value, num_heads, num_kv_heads, out, "_npu_flash_attention",
                    bias_of)  # fmt: skip


@npu_op(
    "atb::_npu_flash_attention_unpad(Tensor query, Tensor key, Tensor value, Tensor seq_len, float scale_value, "
    "int num_heads, int num_kv_heads, Tensor(a!) out) -> ()",
    fake=_writes_out_only,
)
def _npu_flash_attention_unpad(query, key, value, seq_len, scale_value, num_heads, num_kv_heads, out):
    """_npu_flash_attention without a mask: every token attends to all the tokens of its own sequence (an
    encoder's prefill); value may have its own head size (out [tokens, num_heads, Dv])."""
    _unmasked_prefill(
        query, key, value, seq_len, scale_value, num_heads, num_kv_heads, out, "_npu_flash_attention_unpad"
    )


def _unmasked_prefill(query, key, value, seq_len, scale_value, num_heads, num_kv_heads, out, op):
    def bias_of(index, length):
        return query.new_zeros(length, length, dtype=torch.float32)

    packed_prefill(query, key, value, seq_len, scale_value, num_heads, num_kv_heads, out, op, bias_of)


@npu_op(
    "atb::_npu_flash_attention_unpad_v2(Tensor query, Tensor key, Tensor value, Tensor seq_len, float scale_value, "
    "int num_heads, int num_kv_heads, *, int? kernel_type=0, Tensor(a!) out) -> ()",
    fake=_writes_out_only,
)
def _npu_flash_attention_unpad_v2(query, key, value, seq_len, scale_value, num_heads, num_kv_heads, *, kernel_type=0,
                                  out):  # fmt: skip
    """_npu_flash_attention_unpad with a kernel choice: 0 (default) or 2 (EXP_M8V2, the card's faster exponential;
    vnpu computes both with the float32 exponential)."""
    kernel_type = 0 if kernel_type is None else kernel_type
    require(kernel_type in (0, 2), f"kernel_type only supports KERNELTYPE_DEFAULT(0) and KERNELTYPE_EXP_M8V2(2), but got: {kernel_type}")  # fmt: skip
    _unmasked_prefill(query, key, value, seq_len, scale_value, num_heads, num_kv_heads, out, "_npu_flash_attention_unpad_v2")  # fmt: skip


@npu_op(
    "atb::_npu_flash_attention_v3(Tensor query, Tensor key, Tensor value, Tensor mask, Tensor seq_len, "
    "float scale_value, int num_heads, int num_kv_heads, *, int? mask_type=3, Tensor(a!) out) -> ()",
    fake=_writes_out_only,
)
def _npu_flash_attention_v3(query, key, value, mask, seq_len, scale_value, num_heads, num_kv_heads, *, mask_type=3,
                            out):  # fmt: skip
    """_npu_flash_attention with ATB's compressed causal mask (mask_type 3, the only one it takes): each token attends
    to itself and the tokens before it in its sequence."""
    mask_type = 3 if mask_type is None else mask_type
    require(mask_type == 3, f"mask_type only supports MASK_TYPE_NORM_COMPRESS, but got: {mask_type}")

    def causal(index, length):
        later = torch.ones(length, length, dtype=torch.bool, device=query.device).triu(1)
        return torch.zeros(length, length, device=query.device).masked_fill(later, float("-inf"))

    packed_prefill(query, key, value, seq_len, scale_value, num_heads, num_kv_heads, out, "_npu_flash_attention_v3",
                   causal)  # fmt: skip


@npu_op(
    "atb::_npu_paged_attention_splitfuse(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, "
    "Tensor context_lens, Tensor mask, Tensor seq_len, int num_kv_heads, int num_heads, float scale_value, "
    "Tensor(a!) out) -> ()",
    fake=_writes_out_only,
)
def _npu_paged_attention_splitfuse(
    query, key_cache, value_cache, block_table, context_lens, mask, seq_len, num_kv_heads, num_heads, scale_value, out
):
    """Chunked prefill over a paged cache: query [tokens, num_heads, D] packs each sequence's seq_len[i] new tokens,
    whose keys and values are already in the cache as the last of its context_lens[i] rows. `mask` is added to the
    scores: either one row per query token ([tokens, max_len], its first context_lens[i] columns), or a square
    [max_len, max_len] causal mask whose rows context_lens[i] - seq_len[i] .. context_lens[i] apply."""
    op = "_npu_paged_attention_splitfuse"
    square = mask.reshape(-1, mask.shape[-1]) if mask.shape[-2] != query.shape[0] else None

    def bias(rows, length, context):
        return mask[rows, :context] if square is None else square[context - length : context, :context]

    cache, lengths = (key_cache, value_cache, block_table), (seq_len, context_lens)
    _prefill_over_cache(op, bias, query, cache, lengths, (num_kv_heads, num_heads), scale_value, out)


_PAGED_MASK_TYPES = {0: "UNDEFINED(0)", 1: "MASK_TYPE_NORM(1)", 2: "MASK_TYPE_ALIBI(2)", 3: "MASK_TYPE_SPEC(3)", 4: "MASK_TYPE_MASK_FREE(4)", 5: "MASK_TYPE_NORM_COMPRESS(5)"}  # fmt: skip


@npu_op(
    "atb::_npu_paged_attention_splitfuse_v2(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, "
    "Tensor context_lens, Tensor mask, Tensor seq_len, int num_kv_heads, int num_heads, float scale_value, *, "
    "int? mask_type=5, Tensor(a!) out) -> ()",
    fake=_writes_out_only,
)
def _npu_paged_attention_splitfuse_v2(
    query, key_cache, value_cache, block_table, context_lens, mask, seq_len, num_kv_heads, num_heads, scale_value, *,
    mask_type=5, out,
):  # fmt: skip
    """_npu_paged_attention_splitfuse with ATB's compressed causal mask (mask_type 5, the only one it takes): each
    sequence's new tokens, the last of its context, attend to the context before them and causally to each other."""
    mask_type = 5 if mask_type is None else mask_type
    name = _PAGED_MASK_TYPES.get(mask_type, f"UNKNOWN({mask_type})")
    require(mask_type == 5, f"mask_type only supports MASK_TYPE_NORM_COMPRESS(5), but got: {name}")
    cache, lengths = (key_cache, value_cache, block_table), (seq_len, context_lens)
    heads = (num_kv_heads, num_heads)
    _prefill_over_cache("_npu_paged_attention_splitfuse_v2", causal_over_context(query.device), query, cache, lengths, heads, scale_value, out)  # fmt: skip


def _prefill_over_cache(op, bias_of, query, cache, lengths, heads, scale_value, out):
    """Each sequence's seq_len[i] new tokens (packed in query) attend to its first context_lens[i] cache rows, with
    bias_of(query rows, new tokens, context) added to the scores; cache = (key_cache, value_cache, block_table),
    lengths = (seq_len, context_lens), heads = (num_kv_heads, num_heads)."""
    (key_cache, value_cache, block_table), (seq_len, context_lens), (num_kv_heads, num_heads) = cache, lengths, heads
    check(query.dim() == 3 and query.shape[1] == num_heads, op, f"query must be [tokens, {num_heads}, head_size]")
    new_tokens = [int(n) for n in seq_len.cpu().tolist()]
    contexts = [int(n) for n in context_lens.cpu().tolist()]
    keys, values = sequence_rows(key_cache, value_cache, block_table)
    prefill_rows(op, bias_of, query, keys, values, new_tokens, contexts, num_kv_heads, scale_value, out)


def prefill_rows(op, bias_of, query, keys, values, new_tokens, contexts, num_kv_heads, scale_value, out):
    """_prefill_over_cache over gathered rows (keys / values [batch, L, KV, D]) and host lengths."""
    check(sum(new_tokens) == query.shape[0], op, f"seq_len sums to {sum(new_tokens)}, the query has {query.shape[0]}")
    start = 0
    for index, (length, context) in enumerate(zip(new_tokens, contexts, strict=True)):
        rows = slice(start, start + length)
        k, v = keys[index, :context], values[index, :context]
        bias = bias_of(rows, length, context)
        out[rows] = _attend(query[rows], k, v, bias, num_kv_heads, scale_value, op).to(out.dtype)
        start += length


@npu_op(
    "atb::_npu_flash_attention_qlens(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, "
    "Tensor mask, Tensor seq_len, Tensor context_lens, int num_kv_heads, int num_heads, float scale_value, "
    "Tensor(a!) out) -> ()",
    fake=_writes_out_only,
)
def _npu_flash_attention_qlens(
    query, key_cache, value_cache, block_table, mask, seq_len, context_lens, num_kv_heads, num_heads, scale_value, out
):
    """Prefill with a prefix cache: each sequence's seq_len[i] new tokens (packed in query) attend causally to its
    first context_lens[i] cache rows, of which they are the last. `mask` is ATB's compressed causal mask (its
    pattern is the upper triangle, so the causal rule is applied for every length)."""
    args = (query, key_cache, value_cache, block_table, seq_len, context_lens, num_kv_heads, num_heads, scale_value)
    causal_prefix_prefill(*args, out, "_npu_flash_attention_qlens")


def causal_prefix_prefill(
    query, key_cache, value_cache, block_table, seq_len, context_lens, num_kv_heads, num_heads, scale_value, out, op
):
    """The prefix-encoder kernel: new tokens attend causally to their sequence's cache rows (they are its last)."""
    check(
        key_cache.dim() == 4 and key_cache.shape[1] == 128,
        op,
        f"the prefix-encoder kernel needs blockSize=128, got a key_cache of block size {key_cache.shape[1]}",
    )
    cache, lengths = (key_cache, value_cache, block_table), (seq_len, context_lens)
    _prefill_over_cache(
        op, causal_over_context(query.device), query, cache, lengths, (num_kv_heads, num_heads), scale_value, out
    )


def causal_over_context(device):
    """bias_of for new tokens that are the last of their sequence's context rows: each sees itself and before."""

    def bias_of(rows, length, context):
        position = torch.arange(context - length, context, device=device)[:, None]
        later = torch.arange(context, device=device)[None, :] > position
        return torch.zeros(later.shape, device=device).masked_fill(later, float("-inf"))

    return bias_of


@npu_op(
    "atb::_npu_paged_attention_mla(Tensor query, Tensor key_cache, int num_kv_heads, int num_heads, "
    "float scale_value, Tensor block_table, Tensor context_lens, int mla_vheadsize, Tensor(a!) out) -> ()"
)
def _npu_paged_attention_mla(
    query, key_cache, num_kv_heads, num_heads, scale_value, block_table, context_lens, mla_vheadsize, out
):
    """Decode attention of multi-head latent attention: the cache rows hold the compressed latent and the rotary
    key together; keys are the whole rows, values their first mla_vheadsize entries. Writes out
    [batch, num_heads, mla_vheadsize]."""
    op = "_npu_paged_attention_mla"
    check(
        0 < mla_vheadsize <= key_cache.shape[-1],
        op,
        f"mla_vheadsize {mla_vheadsize} is not in (0, " f"{key_cache.shape[-1]}]",
    )
    value_cache = key_cache[..., :mla_vheadsize]
    paged_decode(
        query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table, context_lens, out, op
    )
