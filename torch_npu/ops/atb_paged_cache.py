"""op-plugin's ATB operators that fill an inference engine's paged KV cache and rotate its queries and keys
(torch.ops.atb.*, also torch_npu.<name>; vllm-ascend's cache path).

_npu_reshape_and_cache writes token t's key and value into slot `slot_indices[t]` of the caches: block
slot // block_size, row slot % block_size; a negative slot (a padded token) writes nothing. ND caches are
[num_blocks, block_size, heads, head_size]; FRACTAL_NZ caches (npu_format_cast(cache, 29)) are
[num_blocks, heads * head_size / c0, block_size, c0] and take each token as head_size * heads / c0 rows of c0.
The writes need no host read of the slots, so the operator can be captured in an NPU graph."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op
from torch_npu.ops.rope import rope_tokens

__all__ = []

_FRACTAL_NZ = 29


def _is_nz(cache):
    import torch_npu

    return torch_npu.get_npu_format(cache) == _FRACTAL_NZ


def fractal_rows(blocked):
    """A FRACTAL_NZ block order [n, K / c0, rows, c0] viewed as [n, rows, K / c0, c0]: each row's K values together."""
    return blocked.permute(0, 2, 1, 3)


def cache_rows(cache):
    """A paged cache as [blocks, block_size, ...] rows, one per token: ND as it is, FRACTAL_NZ
    ([blocks, H / c0, block_size, c0]) through a view."""
    return fractal_rows(cache) if _is_nz(cache) else cache


def _token_rows_of(cache, tokens, op, name):
    """cache_rows(cache), after checking that a token of `tokens` fills one row."""
    rows_view = cache_rows(cache)
    check(
        tokens.shape[1:].numel() == rows_view.shape[2:].numel(),
        op,
        f"a token of {name} has {tokens.shape[1:].numel()} elements, a row of its cache {rows_view.shape[2:].numel()}",
    )
    return rows_view


def write_slots(tokens, cache, slots, op, name):
    """cache[slot] = token for every non-negative slot, touching only the tokens' rows (never the whole cache) and
    reading nothing on the host: a skipped token (slot < 0) is sent to the first written token's row with that
    token's values (or, when no token is written, to row 0 with its own contents), so that it changes nothing."""
    write_rows(tokens, _token_rows_of(cache, tokens, op, name), slots)


def write_rows(tokens, rows_view, slots):
    """write_slots into a cache already viewed as rows [blocks, block_size, *a token's shape]."""
    block_size = rows_view.shape[1]
    slots = slots.to(device=rows_view.device, dtype=torch.long).flatten()
    values = tokens.reshape(tokens.shape[0], *rows_view.shape[2:]).to(rows_view.dtype)
    keep = slots >= 0
    first = keep.to(torch.uint8).argmax().view(1)  # the first written token (token 0 when none is), as an index
    any_kept = keep[first]
    target = torch.where(keep, slots, torch.where(any_kept, slots[first], 0))
    block, row = target // block_size, target % block_size
    shape = (-1, *([1] * (values.dim() - 1)))
    fallback = torch.where(any_kept.view(shape), values[first], rows_view[block[first], row[first]])
    rows_view[block, row] = torch.where(keep.view(shape), values, fallback)


@npu_op(
    "atb::_npu_reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
    "Tensor slot_indices) -> ()"
)
def _npu_reshape_and_cache(key, value, key_cache, value_cache, slot_indices):
    """Writes each token's key and value into its slot of the paged caches (ND or FRACTAL_NZ)."""
    op = "_npu_reshape_and_cache"
    check(key.shape[0] == value.shape[0] == slot_indices.numel(), op, "key, value and slot_indices differ in tokens")
    for cache, name in ((key_cache, "key_cache"), (value_cache, "value_cache")):
        check(cache.dim() == 4, op, f"{name} must be 4-D, got {cache.dim()}-D")
    write_slots(key, key_cache, slot_indices, op, "key")
    write_slots(value, value_cache, slot_indices, op, "value")


@npu_op(
    "atb::_npu_rotary_embedding(Tensor positions, Tensor(a!) query, Tensor(b!) key, int head_size, "
    "Tensor cos_sin_cache, bool is_neox_style) -> ()"
)
def _npu_rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox_style):
    """Rotates query and key ([tokens, heads * head_size]) in place at their positions: cos_sin_cache is
    [max_position, rotary_dim] (the cos half, then the sin half); the first rotary_dim channels of each head rotate
    (neox: the two halves, otherwise each (even, odd) pair), 16-bit inputs in float32, as npu_mrope."""
    cos, sin = cos_sin_cache.index_select(0, positions.flatten().long()).chunk(2, dim=-1)
    mode = "half" if is_neox_style else "interleave"
    query.copy_(rope_tokens(query, cos, sin, head_size, mode))
    key.copy_(rope_tokens(key, cos, sin, head_size, mode))


@npu_op("atb::_npu_reshape_and_cache_siso(Tensor key, Tensor(a!) key_cache, Tensor slot_indices) -> ()")
def _npu_reshape_and_cache_siso(key, key_cache, slot_indices):
    """_npu_reshape_and_cache for a key cache alone (an MLA cache of latent + rotary key rows)."""
    op = "_npu_reshape_and_cache_siso"
    check(key.shape[0] == slot_indices.numel(), op, "key and slot_indices differ in tokens")
    check(key_cache.dim() == 4, op, f"key_cache must be 4-D, got {key_cache.dim()}-D")
    write_slots(key, key_cache, slot_indices, op, "key")


def _token_rows(block_table, context_lens, seq_starts, cumsum, tokens, block_size):
    """Each output token's (block, row) in the cache, found on the device: sequence b's tokens fill output rows
    from the sum of the lengths before it, read from blocks block_table[b, seq_starts[b] // block_size + i]."""
    device = block_table.device
    given = context_lens.to(device=device, dtype=torch.long).flatten()
    ends = given if cumsum else given.cumsum(0)
    starts = torch.nn.functional.pad(ends[:-1], (1, 0))
    token = torch.arange(tokens, device=device)
    sequence = torch.searchsorted(ends, token, right=True).clamp(max=given.numel() - 1)
    position = token - starts[sequence]
    if seq_starts is not None:
        first_block = seq_starts.to(device=device, dtype=torch.long) // block_size
        position = position + first_block[sequence] * block_size
    block = block_table.long()[sequence, position // block_size]
    return block, position % block_size


def _load(cache, block, row, out, op, name):
    out.copy_(_token_rows_of(cache, out, op, name)[block, row].reshape(out.shape))


def _paged_cache_load(key_cache, value_cache, block_table, context_lens, seq_starts, cumsum, key, value):
    op = "npu_paged_cache_load"
    for cache, name in ((key_cache, "key_cache"), (value_cache, "value_cache")):
        check(cache.dim() == 4, op, f"{name} must be 4-D, got {cache.dim()}-D")
    nz = _is_nz(key_cache)
    check(not (nz and (cumsum or seq_starts is not None)), op, "cumsum and seq_starts need ND caches, not FRACTAL_NZ")
    check(key.shape[0] == value.shape[0], op, "key and value differ in tokens")
    block_size = key_cache.shape[2] if nz else key_cache.shape[1]
    block, row = _token_rows(block_table, context_lens, seq_starts, cumsum, key.shape[0], block_size)
    _load(key_cache, block, row, key, op, "key")
    _load(value_cache, block, row, value, op, "value")
    return key, value


def _loaded_tokens(context_lens, cumsum):
    if context_lens.numel() == 0:
        return 0
    return int(context_lens.flatten()[-1]) if cumsum else int(context_lens.sum())


_LOAD_ARGS = "Tensor key_cache, Tensor value_cache, Tensor block_table, Tensor context_lens, *, Tensor? seq_starts=None, bool cumsum=False"  # fmt: skip


def _load_fake(key_cache, value_cache, block_table, context_lens, *, seq_starts=None, cumsum=False):
    tokens = torch.library.get_ctx().new_dynamic_size()
    return key_cache.new_empty(tokens, *key_cache.shape[2:]), value_cache.new_empty(tokens, *value_cache.shape[2:])


@npu_op(f"atb::npu_paged_cache_load({_LOAD_ARGS}) -> (Tensor, Tensor)", fake=_load_fake)
def npu_paged_cache_load(key_cache, value_cache, block_table, context_lens, *, seq_starts=None, cumsum=False):
    """Gathers each sequence's cached keys and values into contiguous [tokens, heads, head_size] tensors (ND
    caches; the token count is read from context_lens on the host, as op-plugin does)."""
    check(not _is_nz(key_cache), "npu_paged_cache_load", "FRACTAL_NZ caches need the out form (key=, value=)")
    tokens = _loaded_tokens(context_lens, cumsum)
    key = key_cache.new_empty(tokens, *key_cache.shape[2:])
    value = value_cache.new_empty(tokens, *value_cache.shape[2:])
    return _paged_cache_load(key_cache, value_cache, block_table, context_lens, seq_starts, cumsum, key, value)


@npu_op(
    f"atb::npu_paged_cache_load.out({_LOAD_ARGS}, Tensor(a!) key, Tensor(b!) value) -> (Tensor(a!), Tensor(b!))",
    fake=lambda *args, key, value, **kwargs: (key, value),
)
def npu_paged_cache_load_out(key_cache, value_cache, block_table, context_lens, *, seq_starts=None, cumsum=False,
                             key, value):  # fmt: skip
    """The out form: as many tokens as key has rows, found on the device (no host read: graph-capturable)."""
    return _paged_cache_load(key_cache, value_cache, block_table, context_lens, seq_starts, cumsum, key, value)
