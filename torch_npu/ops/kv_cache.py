"""npu_scatter_pa_kv_cache (+ _functional): write each token's key and value into a paged KV cache.

slot_mapping[i] = block * block_size + offset is where token i goes. cache_mode "Norm": caches
[blocks, block_size, N, D] and cache[block, offset] = token. cache_mode "PA_NZ": caches
[blocks, N * D // last, block_size, last] (the fractal layout, last = 16 for 16-bit types, 32 for int8) and
cache[block, :, offset, :] = token viewed as [N * D // last, last]. Negative slots are padding tokens and
write nothing (vLLM's convention). Not supported: the compressed scenarios (compress_lens,
compress_seq_offsets, seq_lens). npu_scatter_pa_cache.value writes one cache the same way ("Norm" for a cache
[blocks, block_size, N, D], "PA_NZ" for [blocks, N * D // last, block_size, last]).
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_scatter_pa_kv_cache"
_ARGS = (
    "Tensor? compress_lens=None, Tensor? compress_seq_offsets=None, Tensor? seq_lens=None, " "str? cache_mode='PA_NZ'"
)


def _block_size(name, tokens, cache, slot_mapping, cache_mode):
    """The cache's block size, after checking its shape against the tokens and the slots against its capacity."""
    check(tokens.dim() == 3, _OP, f"{name} must be 3-D [tokens, N, D], got {tuple(tokens.shape)}")
    check(cache.dtype == tokens.dtype, _OP, f"{name}_cache must be {tokens.dtype} like {name}, got {cache.dtype}")
    check(cache.dim() == 4, _OP, f"{name}_cache must be 4-D, got {tuple(cache.shape)}")
    width = tokens.shape[1] * tokens.shape[2]
    if cache_mode == "Norm":
        block_size = cache.shape[1]
        check(
            tuple(cache.shape[2:]) == tuple(tokens.shape[1:]),
            _OP,
            f"{name}_cache must be [blocks, block_size, {tokens.shape[1]}, {tokens.shape[2]}], got {tuple(cache.shape)}",
        )
    else:
        block_size, last = cache.shape[2], cache.shape[3]
        check(
            cache.shape[1] * last == width,
            _OP,
            f"{name}_cache must be [blocks, {width} // last, block_size, last] (PA_NZ), got {tuple(cache.shape)}",
        )
    capacity = cache.shape[0] * block_size
    slots = slot_mapping.long()
    check(
        bool((slots < capacity).all()),
        _OP,
        f"slot_mapping holds a slot beyond the cache's {capacity} ({cache.shape[0]} blocks of {block_size})",
    )
    return block_size


def _scatter(tokens, cache, slot_mapping, block_size, cache_mode):
    slots = slot_mapping.long()
    written = slots >= 0
    slots, rows = slots[written], tokens[written]
    blocks, offsets = slots // block_size, slots % block_size
    if cache_mode == "Norm":
        cache[blocks, offsets] = rows
    else:
        cache[blocks, :, offsets, :] = rows.reshape(rows.shape[0], cache.shape[1], cache.shape[3])


def _write(key, value, key_cache, value_cache, slot_mapping, compress_lens, compress_seq_offsets, seq_lens, mode):
    mode = "PA_NZ" if mode is None else mode
    check(mode in ("PA_NZ", "Norm"), _OP, f"cache_mode must be 'PA_NZ' or 'Norm', got {mode!r}")
    for name, given in (
        ("compress_lens", compress_lens),
        ("compress_seq_offsets", compress_seq_offsets),
        ("seq_lens", seq_lens),
    ):
        check(given is None, _OP, f"{name} (the compressed KV-cache scenarios) is not supported by vnpu")
    check(
        slot_mapping.dim() == 1 and slot_mapping.shape[0] == key.shape[0],
        _OP,
        f"slot_mapping must be [tokens={key.shape[0]}], got {tuple(slot_mapping.shape)}",
    )
    check(
        slot_mapping.dtype in (torch.int32, torch.int64),
        _OP,
        f"slot_mapping must be int32 or int64, got {slot_mapping.dtype}",
    )
    check(
        value.shape[0] == key.shape[0],
        _OP,
        f"key and value must hold the same tokens, got {key.shape[0]} and {value.shape[0]}",
    )
    key_block = _block_size("key", key, key_cache, slot_mapping, mode)
    value_block = _block_size("value", value, value_cache, slot_mapping, mode)
    _scatter(key, key_cache, slot_mapping, key_block, mode)
    _scatter(value, value_cache, slot_mapping, value_block, mode)


@npu_op(
    "npu_scatter_pa_kv_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
    f"Tensor slot_mapping, *, {_ARGS}) -> ()",
    fake=lambda *args, **kwargs: None,
)
def npu_scatter_pa_kv_cache(
    key,
    value,
    key_cache,
    value_cache,
    slot_mapping,
    *,
    compress_lens=None,
    compress_seq_offsets=None,
    seq_lens=None,
    cache_mode="PA_NZ",
):
    _write(key, value, key_cache, value_cache, slot_mapping, compress_lens, compress_seq_offsets, seq_lens, cache_mode)


@npu_op(
    "npu_scatter_pa_kv_cache_functional(Tensor key, Tensor value, Tensor key_cache, Tensor value_cache, "
    f"Tensor slot_mapping, *, {_ARGS}) -> (Tensor, Tensor)",
    fake=lambda key, value, key_cache, value_cache, *args, **kwargs: (
        torch.empty_like(key_cache),
        torch.empty_like(value_cache),
    ),
)
def npu_scatter_pa_kv_cache_functional(
    key,
    value,
    key_cache,
    value_cache,
    slot_mapping,
    *,
    compress_lens=None,
    compress_seq_offsets=None,
    seq_lens=None,
    cache_mode="PA_NZ",
):
    """npu_scatter_pa_kv_cache on copies of the caches, returned."""
    key_cache, value_cache = key_cache.clone(), value_cache.clone()
    _write(key, value, key_cache, value_cache, slot_mapping, compress_lens, compress_seq_offsets, seq_lens, cache_mode)
    return key_cache, value_cache


@npu_op(
    "npu_scatter_pa_cache.value(Tensor key, Tensor slot_mapping, *, Tensor? compress_lens=None, "
    "Tensor? compress_seq_offsets=None, Tensor? seq_lens=None, Tensor(a!) key_cache) -> Tensor(a!)",
    fake=lambda key, slot_mapping, *, key_cache, **kwargs: key_cache,
)
def npu_scatter_pa_cache_value(key, slot_mapping, *, compress_lens=None, compress_seq_offsets=None, seq_lens=None,
                               key_cache):  # fmt: skip
    """Each token of key written into key_cache at its slot; key_cache returned."""
    for name, given in (("compress_lens", compress_lens), ("compress_seq_offsets", compress_seq_offsets), ("seq_lens", seq_lens)):  # fmt: skip
        check(given is None, "npu_scatter_pa_cache", f"{name} (the compressed KV-cache scenarios) is not supported by vnpu")  # fmt: skip
    check(slot_mapping.dim() == 1 and slot_mapping.shape[0] == key.shape[0], "npu_scatter_pa_cache",
          f"slot_mapping must hold one slot per token ({key.shape[0]}), got {tuple(slot_mapping.shape)}")  # fmt: skip
    mode = "Norm" if key_cache.dim() == 4 and key_cache.shape[2:] == key.shape[1:] else "PA_NZ"
    _scatter(key, key_cache, slot_mapping, _block_size("key", key, key_cache, slot_mapping, mode), mode)
    return key_cache
