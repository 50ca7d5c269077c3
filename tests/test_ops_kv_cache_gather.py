"""npu_gather_pa_kv_cache(_functional) against token-by-token gathering written out (Norm and PA_NZ layouts,
cumulative seq_lens, seq_offset), and its argument checks."""

import torch
from error_cases import raises_operator_error

import torch_npu

BLOCKS, BLOCK, HEADS, DK, DV = 6, 4, 2, 3, 5


def reference(cache, tables, lengths, offsets, nz):
    rows = []
    for i, n in enumerate(lengths):
        for t in range(n):  # seq_offset moves the start by whole blocks
            block = int(tables[i, offsets[i] // BLOCK + t // BLOCK])
            slot = t % BLOCK
            rows.append(cache[block, :, slot, :].reshape(-1) if nz else cache[block, slot])
    return torch.stack(rows)


def test_norm_layout_with_offsets_and_cumulative_lengths():
    g = torch.Generator().manual_seed(9)
    key_cache = torch.randn(BLOCKS, BLOCK, HEADS, DK, generator=g).half()
    value_cache = torch.randn(BLOCKS, BLOCK, HEADS, DV, generator=g).half()
    tables = torch.tensor([[5, 2, 0], [1, 3, 4]], dtype=torch.int32)
    lengths, offsets = [6, 3], [0, 4]
    key, value = torch.zeros(9, HEADS, DK).half().npu(), torch.zeros(9, HEADS, DV).half().npu()
    torch_npu.npu_gather_pa_kv_cache(
        key_cache.npu(), value_cache.npu(), tables.npu(), torch.tensor([0, 6, 9], dtype=torch.int32).npu(), key, value,
        seq_offset=torch.tensor(offsets, dtype=torch.int32).npu(), is_seq_lens_cumsum=True,
    )  # fmt: skip
    assert torch.equal(key.cpu(), reference(key_cache, tables, lengths, offsets, False))
    assert torch.equal(value.cpu(), reference(value_cache, tables, lengths, offsets, False))


def test_nz_layout_functional():
    g = torch.Generator().manual_seed(10)
    key_cache = torch.randn(BLOCKS, 3, BLOCK, 16, generator=g).half()  # 48 values a token, in 3 chunks of 16
    value_cache = torch.randn(BLOCKS, 2, BLOCK, 16, generator=g).half()
    tables = torch.tensor([[4, 1]], dtype=torch.int32)
    key, value = torch.zeros(5, 48).half(), torch.zeros(5, 32).half()
    before = key.clone().npu()
    k, v = torch_npu.npu_gather_pa_kv_cache_functional(
        key_cache.npu(),
        value_cache.npu(),
        tables.npu(),
        torch.tensor([5], dtype=torch.int32).npu(),
        before,
        value.npu(),
    )
    assert torch.equal(k.cpu(), reference(key_cache, tables, [5], [0], True))
    assert torch.equal(v.cpu(), reference(value_cache, tables, [5], [0], True))
    assert torch.equal(before.cpu(), key)  # the functional form leaves key alone


def test_bad_arguments():
    key_cache = torch.zeros(BLOCKS, BLOCK, HEADS, DK).npu()
    tables = torch.tensor([[0, 1]], dtype=torch.int32).npu()
    key, value = torch.zeros(3, HEADS, DK).npu(), torch.zeros(3, HEADS, DK).npu()
    raises_operator_error(
        lambda: torch_npu.npu_gather_pa_kv_cache(key_cache, key_cache, tables, torch.tensor([4]).npu(), key, value),
        "npu_gather_pa_kv_cache: key / value must be [4, 2, 3] / [4, 2, 3] for these sequences, got [3, 2, 3] / [3, 2, 3]",
    )
    raises_operator_error(
        lambda: torch_npu.npu_gather_pa_kv_cache(key_cache, key_cache, tables, torch.tensor([9]).npu(), key, value),
        "npu_gather_pa_kv_cache: sequence 0 needs more blocks than block_tables has (2)",
    )
