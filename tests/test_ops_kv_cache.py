"""npu_scatter_pa_kv_cache (+ _functional) against a token-by-token loop written here, in both cache layouts,
and read back through npu_fused_infer_attention_score's paged path."""

import pytest
import torch

import torch_npu

TOKENS, N, D, BLOCKS, BLOCK_SIZE = 7, 2, 16, 5, 4


def _inputs(seed, dtype=torch.float16, value_width=D):
    g = torch.Generator().manual_seed(seed)
    key = torch.randn(TOKENS, N, D, generator=g).to(dtype)
    value = torch.randn(TOKENS, N, value_width, generator=g).to(dtype)
    slots = torch.randperm(BLOCKS * BLOCK_SIZE, generator=g)[:TOKENS].to(torch.int32)
    slots[2] = -1  # a padding token
    return key, value, slots


def ref_norm(tokens, cache, slots):
    cache = cache.clone()
    for i, slot in enumerate(slots.tolist()):
        if slot >= 0:
            cache[slot // BLOCK_SIZE, slot % BLOCK_SIZE] = tokens[i]
    return cache


def ref_nz(tokens, cache, slots):
    cache = cache.clone()
    last = cache.shape[-1]
    for i, slot in enumerate(slots.tolist()):
        if slot >= 0:
            cache[slot // BLOCK_SIZE, :, slot % BLOCK_SIZE, :] = tokens[i].reshape(-1, last)
    return cache


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8])
def test_norm_layout_with_different_key_and_value_widths(dtype):
    key, value, slots = _inputs(0, torch.float32, value_width=8)
    key, value = (key * 40).to(dtype), (value * 40).to(dtype)
    key_cache = torch.ones(BLOCKS, BLOCK_SIZE, N, D, dtype=dtype)
    value_cache = torch.ones(BLOCKS, BLOCK_SIZE, N, 8, dtype=dtype)
    kc, vc = key_cache.npu(), value_cache.npu()
    result = torch_npu.npu_scatter_pa_kv_cache(key.npu(), value.npu(), kc, vc, slots.npu(), cache_mode="Norm")
    assert result is None
    assert torch.equal(kc.cpu(), ref_norm(key, key_cache, slots))
    assert torch.equal(vc.cpu(), ref_norm(value, value_cache, slots))


@pytest.mark.parametrize("dtype, last", [(torch.float16, 16), (torch.int8, 32)])
def test_pa_nz_layout_is_the_default(dtype, last):
    key, value, slots = _inputs(1, torch.float32)
    key, value = (key * 40).to(dtype), (value * 40).to(dtype)
    key_cache = torch.zeros(BLOCKS, N * D // last, BLOCK_SIZE, last, dtype=dtype)
    value_cache = torch.zeros_like(key_cache)
    kc, vc = key_cache.npu(), value_cache.npu()
    torch_npu.npu_scatter_pa_kv_cache(key.npu(), value.npu(), kc, vc, slots.npu())
    assert torch.equal(kc.cpu(), ref_nz(key, key_cache, slots))
    assert torch.equal(vc.cpu(), ref_nz(value, value_cache, slots))


def test_functional_leaves_the_caches_alone():
    key, value, slots = _inputs(2)
    key_cache = torch.zeros(BLOCKS, BLOCK_SIZE, N, D, dtype=torch.float16).npu()
    value_cache = torch.zeros_like(key_cache)
    new_k, new_v = torch_npu.npu_scatter_pa_kv_cache_functional(
        key.npu(), value.npu(), key_cache, value_cache, slots.long().npu(), cache_mode="Norm"
    )
    assert not key_cache.cpu().any() and not value_cache.cpu().any()
    assert torch.equal(new_k.cpu(), ref_norm(key, key_cache.cpu(), slots))
    assert torch.equal(new_v.cpu(), ref_norm(value, value_cache.cpu(), slots))


def test_writes_into_a_column_slice_of_a_shared_cache():
    """MLA keeps the latent and rope parts side by side in one cache and writes each through a slice view."""
    key, value, slots = _inputs(3, value_width=4)
    cache = torch.zeros(BLOCKS, BLOCK_SIZE, N, D + 4, dtype=torch.float16).npu()
    torch_npu.npu_scatter_pa_kv_cache(
        key.npu(), value.npu(), cache[..., :D], cache[..., D:], slots.npu(), cache_mode="Norm"
    )
    want = ref_norm(torch.cat([key, value], -1), torch.zeros(BLOCKS, BLOCK_SIZE, N, D + 4, dtype=torch.float16), slots)
    assert torch.equal(cache.cpu(), want)


def test_cache_written_by_scatter_is_read_back_by_paged_attention():
    """A decode step: write two requests' KV through slot_mapping, attend over it through block_table."""
    g = torch.Generator().manual_seed(4)
    lengths, block_table = [5, 3], torch.tensor([[3, 0], [4, 1]], dtype=torch.int32)
    keys = [torch.randn(n, N, D, generator=g) for n in lengths]
    values = [torch.randn(n, N, D, generator=g) for n in lengths]
    slots = torch.tensor(
        [
            int(block_table[b, t // BLOCK_SIZE]) * BLOCK_SIZE + t % BLOCK_SIZE
            for b, n in enumerate(lengths)
            for t in range(n)
        ],
        dtype=torch.int32,
    )
    key_cache = torch.zeros(BLOCKS, BLOCK_SIZE, N, D).npu()
    value_cache = torch.zeros_like(key_cache)
    torch_npu.npu_scatter_pa_kv_cache(
        torch.cat(keys).npu(), torch.cat(values).npu(), key_cache, value_cache, slots.npu(), cache_mode="Norm"
    )
    q = torch.randn(2, 1, N * D, generator=g)
    out, _ = torch_npu.npu_fused_infer_attention_score(
        q.npu(),
        key_cache.view(BLOCKS, BLOCK_SIZE, N * D),
        value_cache.view(BLOCKS, BLOCK_SIZE, N * D),
        block_table=block_table.npu(),
        block_size=BLOCK_SIZE,
        actual_seq_lengths_kv=lengths,
        num_heads=N,
        scale=0.25,
    )
    for b in range(len(lengths)):
        qb = q[b, 0].view(N, D)
        p = torch.softmax(torch.einsum("nd,tnd->nt", qb, keys[b]) * 0.25, -1)
        want = torch.einsum("nt,tnd->nd", p, values[b]).reshape(-1)
        torch.testing.assert_close(out.cpu()[b, 0], want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"cache_mode": "ND"}, "cache_mode must be 'PA_NZ' or 'Norm', got 'ND'"),
        ({"seq_lens": torch.ones(1, dtype=torch.int32)}, r"seq_lens \(the compressed KV-cache scenarios\)"),
        ({"slot_mapping": torch.tensor([0, 99], dtype=torch.int32)}, "slot_mapping holds a slot beyond the cache's 20"),
        ({"slot_mapping": torch.tensor([0.0, 1.0])}, "slot_mapping must be int32 or int64, got torch.float32"),
        ({"key_cache": torch.zeros(BLOCKS, BLOCK_SIZE, N, D, dtype=torch.float32)}, "key_cache must be torch.float16"),
        ({"value_cache": torch.zeros(BLOCKS, BLOCK_SIZE, 1, D, dtype=torch.float16)}, r"value_cache must be \[blocks"),
    ],
)
def test_errors_leave_the_caches_unchanged(change, message):
    args = {
        "key": torch.ones(2, N, D, dtype=torch.float16),
        "value": torch.ones(2, N, D, dtype=torch.float16),
        "key_cache": torch.zeros(BLOCKS, BLOCK_SIZE, N, D, dtype=torch.float16),
        "value_cache": torch.zeros(BLOCKS, BLOCK_SIZE, N, D, dtype=torch.float16),
        "slot_mapping": torch.tensor([0, 1], dtype=torch.int32),
        "cache_mode": "Norm",
    }
    args.update(change)
    args = {name: value.npu() if isinstance(value, torch.Tensor) else value for name, value in args.items()}
    with pytest.raises(RuntimeError, match=f"^npu_scatter_pa_kv_cache: {message}"):
        torch_npu.npu_scatter_pa_kv_cache(**args)
    assert not args["key_cache"].cpu().any() and not args["value_cache"].cpu().any()


def test_scatter_pa_cache_writes_one_norm_cache():
    g = torch.Generator().manual_seed(11)
    key = torch.randn(TOKENS, N, D, generator=g).half()
    cache = torch.zeros(BLOCKS, BLOCK_SIZE, N, D).half()
    slots = torch.tensor([3, -1, 0, 19, 7, 8, 12], dtype=torch.int32)
    npu_cache = cache.npu()
    returned = torch_npu.npu_scatter_pa_cache(key.npu(), slots.npu(), key_cache=npu_cache)
    want = cache.clone()
    for token, slot in enumerate(slots.tolist()):
        if slot >= 0:
            want[slot // BLOCK_SIZE, slot % BLOCK_SIZE] = key[token]
    assert returned.data_ptr() == npu_cache.data_ptr() and torch.equal(npu_cache.cpu(), want)
