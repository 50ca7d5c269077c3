"""op-plugin's ATB attention operators that inference engines call (torch.ops.atb.*, also torch_npu.<name>):
_npu_paged_attention (decode over a paged KV cache), _npu_paged_attention_get_workspace,
_npu_paged_attention_splitfuse (chunked prefill: each sequence's new tokens attend to its cached context and to
each other) and _npu_flash_attention (prefill of variable-length sequences packed together).

Both compute as the card's kernels do: scores q·kᵀ in float32 times scale_value, softmax in float32, the
probabilities rounded to the input dtype, then p·v accumulated in float32 and rounded to the output's dtype;
num_heads query heads share num_kv_heads key/value heads in groups. Paged attention reads every sequence's
blocks through block_table and masks the positions at or past its context length on the device, so it needs no
host read and can be captured in an NPU graph (context_lens may be on the host or the device); a sequence of
length 0 gets zeros."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []


def _grouped(t, kv_heads, op):
    """[..., heads, D] -> [..., kv_heads, heads / kv_heads, D]."""
    heads = t.shape[-2]
    check(kv_heads > 0 and heads % kv_heads == 0, op, f"num_heads {heads} is not a multiple of num_kv_heads {kv_heads}")
    return t.unflatten(-2, (kv_heads, heads // kv_heads))


def _sequence_rows(key_cache, value_cache, block_table):
    """Every sequence's cache rows in order, through its blocks: keys [B, blocks * block_size, KV, D], values."""
    table = block_table.long().flatten()
    batch = block_table.shape[0]
    keys = key_cache.index_select(0, table).reshape(batch, -1, *key_cache.shape[2:])
    return keys, value_cache.index_select(0, table).reshape(batch, -1, *value_cache.shape[2:])


def _writes_out_only(*args, **kwargs):
    """The fake kernel of the operators that read lengths on the host: they return nothing and write `out`."""


def _probabilities(scores, dtype):
    return torch.softmax(scores, dim=-1).to(dtype).float()


def _decode(query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table, context_lens, out, op):
    """One query token per sequence over its first context_lens[i] cache rows, masked on the device."""
    check(query.dim() == 3 and query.shape[1] == num_heads, op, f"query must be [batch, {num_heads}, head_size]")
    check(key_cache.dim() == 4 and value_cache.dim() == 4, op, "key_cache and value_cache must be 4-D")
    check(key_cache.shape[2] == num_kv_heads, op, f"key_cache has {key_cache.shape[2]} heads, not {num_kv_heads}")
    batch = query.shape[0]
    keys, values = _sequence_rows(key_cache, value_cache, block_table)
    lengths = context_lens.to(device=query.device, dtype=torch.long).reshape(batch, 1, 1, 1)
    positions = torch.arange(keys.shape[1], device=query.device)
    q = _grouped(query, num_kv_heads, op).float()  # [B, KV, G, D]
    scores = torch.einsum("bhgd,blhd->bhgl", q, keys.float()) * scale_value
    scores = scores.masked_fill(positions >= lengths, float("-inf"))
    p = _probabilities(scores, query.dtype)
    result = torch.einsum("bhgl,blhd->bhgd", p.nan_to_num(0.0), values.float()).flatten(1, 2)
    out.copy_(torch.where(lengths.reshape(batch, 1, 1) > 0, result, 0.0).to(out.dtype))


def _attend(query, keys, values, bias, num_kv_heads, scale_value, op):
    """query [S, N, D] against keys / values [T, KV, D(v)] of one sequence, `bias` [S, T] added to the scores:
    [S, N, Dv] in float32."""
    q = _grouped(query, num_kv_heads, op).float()  # [S, KV, G, D]
    scores = torch.einsum("shgd,thd->hgst", q, keys.float()) * scale_value + bias.float()
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
    _decode(*args, "_npu_paged_attention")


@npu_op(f"atb::_npu_paged_attention_get_workspace({_PAGED_ARGS}) -> Tensor")
def _npu_paged_attention_get_workspace(
    query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table, context_lens, out
):
    """The workspace _npu_paged_attention takes: the card's kernel asks ATB for its size; vnpu's needs none, so
    it is an empty uint8 tensor on the query's device."""
    return torch.empty(0, dtype=torch.uint8, device=query.device)


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
    op = "_npu_flash_attention"
    check(query.dim() == 3 and query.shape[1] == num_heads, op, f"query must be [tokens, {num_heads}, head_size]")
    check(key.shape[1] == num_kv_heads, op, f"key has {key.shape[1]} heads, not {num_kv_heads}")
    lengths = [int(n) for n in seq_len.cpu().tolist()]
    check(sum(lengths) == query.shape[0], op, f"seq_len sums to {sum(lengths)}, the query has {query.shape[0]} tokens")
    start = 0
    for index, length in enumerate(lengths):
        rows = slice(start, start + length)
        seq_mask = mask[index] if mask.dim() == 3 else mask
        bias = seq_mask[:length, :length]
        out[rows] = _attend(query[rows], key[rows], value[rows], bias, num_kv_heads, scale_value, op).to(out.dtype)
        start += length


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


def _prefill_over_cache(op, bias_of, query, cache, lengths, heads, scale_value, out):
    """Each sequence's seq_len[i] new tokens (packed in query) attend to its first context_lens[i] cache rows, with
    bias_of(query rows, new tokens, context) added to the scores; cache = (key_cache, value_cache, block_table),
    lengths = (seq_len, context_lens), heads = (num_kv_heads, num_heads)."""
    (key_cache, value_cache, block_table), (seq_len, context_lens), (num_kv_heads, num_heads) = cache, lengths, heads
    check(query.dim() == 3 and query.shape[1] == num_heads, op, f"query must be [tokens, {num_heads}, head_size]")
    new_tokens = [int(n) for n in seq_len.cpu().tolist()]
    contexts = [int(n) for n in context_lens.cpu().tolist()]
    check(sum(new_tokens) == query.shape[0], op, f"seq_len sums to {sum(new_tokens)}, the query has {query.shape[0]}")
    keys, values = _sequence_rows(key_cache, value_cache, block_table)
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
    op = "_npu_flash_attention_qlens"
    check(
        key_cache.dim() == 4 and key_cache.shape[1] == 128,
        op,
        f"the prefix-encoder kernel needs blockSize=128, got a key_cache of block size {key_cache.shape[1]}",
    )

    def causal(rows, length, context):
        position = torch.arange(context - length, context, device=query.device)[:, None]
        later = torch.arange(context, device=query.device)[None, :] > position
        return torch.zeros(later.shape, device=query.device).masked_fill(later, float("-inf"))

    cache, lengths = (key_cache, value_cache, block_table), (seq_len, context_lens)
    _prefill_over_cache(op, causal, query, cache, lengths, (num_kv_heads, num_heads), scale_value, out)


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
    _decode(query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table, context_lens, out, op)
