"""npu_gather_pa_kv_cache(_functional): a paged KV cache's tokens gathered into contiguous key / value rows
(GatherPaKvCache).

Sequence i has seq_lens[i] tokens (with is_seq_lens_cumsum, seq_lens[i + 1] - seq_lens[i]); its token t is slot
t % block_size of block block_tables[i, seq_offset[i] // block_size + t // block_size]. The rows of the sequences
follow each other in key / value. Layouts, by the caches' rank:
- Norm: caches [num_blocks, block_size, num_heads, head_size], key / value [tokens, num_heads, head_size];
- PA_NZ: caches [num_blocks, num_heads * head_size // a, block_size, a], key / value [tokens, num_heads * head_size].
The in-place form writes key / value; the functional form returns written copies.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_gather_pa_kv_cache"
_ARGS = (
    "Tensor key_cache, Tensor value_cache, Tensor block_tables, Tensor seq_lens, Tensor{a} key, Tensor{b} value, *, "
    "Tensor? seq_offset=None, bool is_seq_lens_cumsum=False"
)


def _rows(cache, block_tables, lengths, offsets, nz):
    block_size = cache.shape[2] if nz else cache.shape[1]
    pieces = []
    for i, length in enumerate(lengths):
        t = torch.arange(length, device=cache.device)
        first = offsets[i] // block_size
        check(first + (length + block_size - 1) // block_size <= block_tables.shape[1] or length == 0, _OP,
              f"sequence {i} needs more blocks than block_tables has ({block_tables.shape[1]})")  # fmt: skip
        blocks = block_tables[i, first + t // block_size].long()
        slots = t % block_size
        if nz:  # [num_blocks, chunks, block_size, a] -> one row of chunks * a per token
            pieces.append(cache[blocks, :, slots, :].reshape(length, -1))
        else:
            pieces.append(cache[blocks, slots])
    return torch.cat(pieces) if pieces else cache.new_empty(0)


def _gather(key_cache, value_cache, block_tables, seq_lens, key, value, seq_offset, is_seq_lens_cumsum):
    check(key_cache.dim() == 4 and value_cache.dim() == 4, _OP, "key_cache and value_cache must be 4-D")
    check(block_tables.dim() == 2, _OP, f"block_tables must be [batch, blocks], got {tuple(block_tables.shape)}")
    nz = key.dim() == 2
    values = [int(v) for v in seq_lens.tolist()]
    lengths = [b - a for a, b in zip(values, values[1:])] if is_seq_lens_cumsum else values
    check(len(lengths) == block_tables.shape[0], _OP,
          f"seq_lens must describe {block_tables.shape[0]} sequences (batch of block_tables)")  # fmt: skip
    offsets = [0] * len(lengths) if seq_offset is None else [int(v) for v in seq_offset.tolist()]
    keys = _rows(key_cache, block_tables, lengths, offsets, nz)
    vals = _rows(value_cache, block_tables, lengths, offsets, nz)
    check(keys.shape == key.shape and vals.shape == value.shape, _OP,
          f"key / value must be {list(keys.shape)} / {list(vals.shape)} for these sequences, "
          f"got {list(key.shape)} / {list(value.shape)}")  # fmt: skip
    return keys, vals


@npu_op(f"npu_gather_pa_kv_cache({_ARGS.format(a='(a!)', b='(b!)')}) -> ()", fake=lambda *a, **k: None)
def npu_gather_pa_kv_cache(key_cache, value_cache, block_tables, seq_lens, key, value, *, seq_offset=None,
                           is_seq_lens_cumsum=False):  # fmt: skip
    """Writes the sequences' tokens into key / value."""
    keys, vals = _gather(key_cache, value_cache, block_tables, seq_lens, key, value, seq_offset, is_seq_lens_cumsum)
    key.copy_(keys)
    value.copy_(vals)


@npu_op(
    f"npu_gather_pa_kv_cache_functional({_ARGS.format(a='', b='')}) -> (Tensor, Tensor)",
    fake=lambda key_cache, value_cache, block_tables, seq_lens, key, value, **k: (
        torch.empty_like(key),
        torch.empty_like(value),
    ),
)
def npu_gather_pa_kv_cache_functional(key_cache, value_cache, block_tables, seq_lens, key, value, *, seq_offset=None,
                                      is_seq_lens_cumsum=False):  # fmt: skip
    """(key, value) holding the sequences' tokens."""
    keys, vals = _gather(key_cache, value_cache, block_tables, seq_lens, key, value, seq_offset, is_seq_lens_cumsum)
    return keys.to(key.dtype).clone(), vals.to(value.dtype).clone()
