"""op-plugin's ATB operators of vllm-ascend's attention path (torch.ops.atb.* = torch_npu.<name>): the paged KV
cache writes (_npu_reshape_and_cache, ND and FRACTAL_NZ caches), decode attention over the cache
(_npu_paged_attention), prefill attention of packed sequences (_npu_flash_attention) and the rotary embedding
(_npu_rotary_embedding), each against a reference written here; the cache path captured in an NPU graph."""

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu

BLOCKS, BLOCK_SIZE, KV_HEADS, HEADS, D = 6, 4, 2, 4, 8


def _cache_reference(tokens, cache, slots, nz=False):
    expected = cache.clone()
    for token, slot in zip(tokens, slots.tolist(), strict=True):
        if slot < 0:
            continue
        block, row = divmod(slot, BLOCK_SIZE)
        if nz:
            expected[block, :, row, :] = token.reshape(-1, cache.shape[-1])
        else:
            expected[block, row] = token
    return expected


@pytest.mark.parametrize(
    "slot_list", [[9, -1, 0, 23, 4], [-1, -1, 7, -1, 2], [-1, -1, -1, -1, -1]], ids=["mixed", "skipped_first", "none"]
)
def test_reshape_and_cache_writes_each_token_into_its_slot_and_skips_negative_slots(slot_list):
    key = torch.randn(5, KV_HEADS, D, dtype=torch.float16)
    value = torch.randn(5, KV_HEADS, 3, dtype=torch.float16)
    key_cache = torch.randn(BLOCKS, BLOCK_SIZE, KV_HEADS, D, dtype=torch.float16)
    value_cache = torch.randn(BLOCKS, BLOCK_SIZE, KV_HEADS, 3, dtype=torch.float16)
    slots = torch.tensor(slot_list, dtype=torch.int32)
    npu_key_cache, npu_value_cache = key_cache.npu(), value_cache.npu()
    torch_npu._npu_reshape_and_cache(key.npu(), value.npu(), npu_key_cache, npu_value_cache, slots.npu())
    assert torch.equal(npu_key_cache.cpu(), _cache_reference(key, key_cache, slots))
    assert torch.equal(npu_value_cache.cpu(), _cache_reference(value, value_cache, slots))


def test_reshape_and_cache_into_fractal_nz_caches_writes_rows_of_c0():
    key = torch.randint(-128, 128, (3, 1, 64), dtype=torch.int8)
    value = torch.randn(3, 1, 32, dtype=torch.bfloat16)
    key_cache = torch.zeros(BLOCKS, 2, BLOCK_SIZE, 32, dtype=torch.int8)  # c0 = 32 for int8
    value_cache = torch.zeros(BLOCKS, 2, BLOCK_SIZE, 16, dtype=torch.bfloat16)  # c0 = 16
    slots = torch.tensor([5, 17, 2], dtype=torch.int32)
    npu_key_cache = torch_npu.npu_format_cast(key_cache.npu(), 29)
    npu_value_cache = torch_npu.npu_format_cast(value_cache.npu(), 29)
    torch_npu._npu_reshape_and_cache(key.npu(), value.npu(), npu_key_cache, npu_value_cache, slots.npu())
    assert torch.equal(npu_key_cache.cpu(), _cache_reference(key, key_cache, slots, nz=True))
    assert torch.equal(npu_value_cache.cpu(), _cache_reference(value, value_cache, slots, nz=True))


def _paged_reference(query, key_cache, value_cache, block_table, lengths, scale, kv_heads=KV_HEADS):
    """Per sequence: gather its first `length` cache rows, float32 scores, softmax rounded to the dtype, p·v."""
    outs = []
    for q, blocks, length in zip(query, block_table.tolist(), lengths.tolist(), strict=True):
        if length == 0:
            outs.append(torch.zeros(HEADS, value_cache.shape[-1], dtype=query.dtype))
            continue
        rows = [(blocks[p // BLOCK_SIZE], p % BLOCK_SIZE) for p in range(length)]
        k = torch.stack([key_cache[b, r] for b, r in rows]).float().repeat_interleave(HEADS // kv_heads, dim=1)
        v = torch.stack([value_cache[b, r] for b, r in rows]).float().repeat_interleave(HEADS // kv_heads, dim=1)
        scores = torch.einsum("hd,lhd->hl", q.float(), k) * scale
        p = torch.softmax(scores, dim=-1).to(query.dtype).float()
        outs.append(torch.einsum("hl,lhd->hd", p, v).to(query.dtype))
    return torch.stack(outs)


def _paged_inputs(dtype=torch.float16):
    g = torch.Generator().manual_seed(0)
    query = torch.randn(3, HEADS, D, generator=g).to(dtype)
    key_cache = torch.randn(BLOCKS, BLOCK_SIZE, KV_HEADS, D, generator=g).to(dtype)
    value_cache = torch.randn(BLOCKS, BLOCK_SIZE, KV_HEADS, 5, generator=g).to(dtype)
    block_table = torch.tensor([[3, 0, 5], [1, 2, 4], [5, 4, 3]], dtype=torch.int32)
    return query, key_cache, value_cache, block_table


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_paged_attention_attends_to_each_sequence_s_cached_tokens(dtype):
    query, key_cache, value_cache, block_table = _paged_inputs(dtype)
    lengths = torch.tensor([9, 1, 0], dtype=torch.int32)  # a padded sequence of length 0 gets zeros
    scale = D**-0.5
    expected = _paged_reference(query, key_cache, value_cache, block_table, lengths, scale)
    results = []
    for context_lens in (lengths, lengths.npu()):  # host or device lengths
        out = torch.empty(3, HEADS, 5, dtype=dtype, device="npu")
        args = (query.npu(), key_cache.npu(), value_cache.npu(), KV_HEADS, HEADS, scale, block_table.npu())
        torch_npu._npu_paged_attention(*args, context_lens, out)
        results.append(out.cpu())
    assert torch.equal(results[0], results[1])
    torch.testing.assert_close(results[0], expected, atol=2e-3, rtol=2e-3)
    workspace = torch_npu._npu_paged_attention_get_workspace(*args, lengths, out)
    assert workspace.dtype == torch.uint8 and workspace.device.type == "npu"
    again = torch.empty_like(out)
    torch_npu._npu_paged_attention(*args, lengths, again, workspace=workspace)
    assert torch.equal(again.cpu(), results[0])


def test_a_captured_decode_step_reads_the_cache_and_lengths_of_each_replay():
    query, key_cache, value_cache, block_table = _paged_inputs()
    q, kc, vc, table = query.npu(), key_cache.npu(), value_cache.npu(), block_table.npu()
    lengths = torch.tensor([5, 5, 5], dtype=torch.int32, device="npu")
    slots = torch.zeros(3, dtype=torch.int32, device="npu")
    new_key, new_value = torch.zeros(3, KV_HEADS, D, device="npu"), torch.zeros(3, KV_HEADS, 5, device="npu")
    out = torch.empty(3, HEADS, 5, dtype=torch.float16, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        torch_npu._npu_reshape_and_cache(new_key, new_value, kc, vc, slots)
        torch_npu._npu_paged_attention(q, kc, vc, KV_HEADS, HEADS, 0.5, table, lengths, out)
    for step in range(2):
        new_key.normal_(), new_value.normal_()
        lengths.add_(1)
        position = 5 + step  # each sequence's new token, written into its block_table slot (not the padded one)
        slot = [block_table[i, position // BLOCK_SIZE].item() * BLOCK_SIZE + position % BLOCK_SIZE for i in range(3)]
        slots.copy_(torch.tensor([slot[0], -1, slot[2]], dtype=torch.int32))
        expected_k = _cache_reference(new_key.cpu().half(), kc.cpu(), slots.cpu())
        expected_v = _cache_reference(new_value.cpu().half(), vc.cpu(), slots.cpu())
        g.replay()
        assert torch.equal(kc.cpu(), expected_k) and torch.equal(vc.cpu(), expected_v)
        expected = _paged_reference(query, expected_k, expected_v, block_table, lengths.cpu(), 0.5)
        torch.testing.assert_close(out.cpu(), expected, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("variant", ["masked", "unpad", "unpad_v2", "v3"])
def test_flash_attention_attends_within_each_packed_sequence_with_the_mask_added(variant):
    """_npu_flash_attention adds the mask to each sequence's scores; _npu_flash_attention_unpad has none;
    _npu_flash_attention_v3 is causal (its mask is ATB's compressed causal one)."""
    g = torch.Generator().manual_seed(1)
    lengths = [3, 5]
    query = torch.randn(8, HEADS, D, generator=g).half()
    key = torch.randn(8, KV_HEADS, D, generator=g).half()
    value = torch.randn(8, KV_HEADS, 6, generator=g).half()
    masks = {"masked": torch.triu(torch.full((5, 5), -10000.0), 1), "v3": torch.triu(torch.full((5, 5), float("-inf")), 1)}  # fmt: skip
    mask = masks.get(variant, torch.zeros(5, 5)).half()
    out = torch.empty(8, HEADS, 6, dtype=torch.float16, device="npu")
    packed = (query.npu(), key.npu(), value.npu())
    seq_len = torch.tensor(lengths, dtype=torch.int32)
    if variant == "masked":
        torch_npu._npu_flash_attention(*packed, mask.npu(), seq_len, 0.3, HEADS, KV_HEADS, out)
    elif variant == "unpad":
        torch_npu._npu_flash_attention_unpad(*packed, seq_len, 0.3, HEADS, KV_HEADS, out)
    elif variant == "unpad_v2":
        torch_npu._npu_flash_attention_unpad_v2(*packed, seq_len, 0.3, HEADS, KV_HEADS, kernel_type=2, out=out)
    else:
        compressed = torch.triu(torch.ones(128, 128), 1).half().npu()
        torch_npu._npu_flash_attention_v3(*packed, compressed, seq_len, 0.3, HEADS, KV_HEADS, out=out)
    expected, start = [], 0
    for n in lengths:
        q = query[start : start + n].float().transpose(0, 1)
        k = key[start : start + n].float().repeat_interleave(2, dim=1).transpose(0, 1)
        v = value[start : start + n].float().repeat_interleave(2, dim=1).transpose(0, 1)
        p = torch.softmax(q @ k.transpose(1, 2) * 0.3 + mask[:n, :n].float(), dim=-1).half().float()
        expected.append((p @ v).transpose(0, 1).half())
        start += n
    torch.testing.assert_close(out.cpu(), torch.cat(expected), atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("neox", [True, False])
def test_rotary_embedding_rotates_query_and_key_in_place_at_their_positions(neox):
    g = torch.Generator().manual_seed(2)
    positions = torch.tensor([0, 7, 3])
    query = torch.randn(3, HEADS * D, generator=g)
    key = torch.randn(3, KV_HEADS * D, generator=g)
    angles = torch.arange(10).float()[:, None] * torch.rand(D // 2, generator=g)
    cache = torch.cat((angles.cos(), angles.sin()), dim=-1)
    npu_query, npu_key = query.npu(), key.npu()
    torch_npu._npu_rotary_embedding(positions.npu(), npu_query, npu_key, D, cache.npu(), neox)

    def rotated(x):
        x = x.reshape(3, -1, D)
        cos, sin = cache[positions, : D // 2][:, None], cache[positions, D // 2 :][:, None]
        if neox:
            a, b = x[..., : D // 2], x[..., D // 2 :]
            return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1).reshape(3, -1)
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).reshape(3, -1)

    torch.testing.assert_close(npu_query.cpu(), rotated(query), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(npu_key.cpu(), rotated(key), atol=1e-6, rtol=1e-6)


def _npu(*shape, dtype=torch.float16):
    return torch.zeros(*shape, dtype=dtype, device="npu")


def _bad_atb_calls():
    """(call, torch_npu's first error line) for each refused argument of the ATB operators."""
    query, key_cache, value_cache, table = (t.npu() for t in _paged_inputs())
    out = _npu(3, HEADS, 5)
    lens, slots = torch.tensor([1, 1, 1], dtype=torch.int32), torch.zeros(2, dtype=torch.int32, device="npu")
    mask, seq = _npu(4, 4), torch.tensor([2, 2])
    decode = (value_cache, KV_HEADS, HEADS, 1.0, table, lens, out)
    return [
        (
            lambda: torch_npu._npu_paged_attention(query, key_cache, value_cache, 3, HEADS, 1.0, table, lens, out),
            "_npu_paged_attention: key_cache has 2 heads, not 3",
        ),
        (
            lambda: torch_npu._npu_paged_attention(query[0], key_cache, *decode),
            "_npu_paged_attention: query must be [batch, 4, head_size]",
        ),
        (
            lambda: torch_npu._npu_paged_attention(query, key_cache[0], *decode),
            "_npu_paged_attention: key_cache and value_cache must be 4-D",
        ),
        (
            lambda: torch_npu._npu_paged_attention(
                _npu(3, 3, D), key_cache, value_cache, KV_HEADS, 3, 1.0, table, lens, out
            ),
            "_npu_paged_attention: num_heads 3 is not a multiple of num_kv_heads 2",
        ),
        (
            lambda: torch_npu._npu_paged_attention_mla(query, key_cache, KV_HEADS, HEADS, 1.0, table, lens, 9, out),
            "_npu_paged_attention_mla: mla_vheadsize 9 is not in (0, 8]",
        ),
        (
            lambda: torch_npu._npu_reshape_and_cache(
                _npu(2, KV_HEADS, D + 1), _npu(2, KV_HEADS, 5), key_cache, value_cache, slots
            ),
            "_npu_reshape_and_cache: a token of key has 18 elements, a row of its cache 16",
        ),
        (
            lambda: torch_npu._npu_reshape_and_cache(
                _npu(3, KV_HEADS, D), _npu(2, KV_HEADS, 5), key_cache, value_cache, slots
            ),
            "_npu_reshape_and_cache: key, value and slot_indices differ in tokens",
        ),
        (
            lambda: torch_npu._npu_reshape_and_cache(
                _npu(2, KV_HEADS, D), _npu(2, KV_HEADS, 5), key_cache[0], value_cache, slots
            ),
            "_npu_reshape_and_cache: key_cache must be 4-D, got 3-D",
        ),
        (
            lambda: torch_npu._npu_reshape_and_cache_siso(_npu(3, KV_HEADS, D), key_cache, slots),
            "_npu_reshape_and_cache_siso: key and slot_indices differ in tokens",
        ),
        (
            lambda: torch_npu._npu_reshape_and_cache_siso(_npu(2, KV_HEADS, D), key_cache[0], slots),
            "_npu_reshape_and_cache_siso: key_cache must be 4-D, got 3-D",
        ),
        (
            lambda: torch_npu._npu_flash_attention(
                _npu(4, 3, D),
                _npu(4, KV_HEADS, D),
                _npu(4, KV_HEADS, D),
                mask,
                seq,
                1.0,
                HEADS,
                KV_HEADS,
                _npu(4, HEADS, D),
            ),
            "_npu_flash_attention: query must be [tokens, 4, head_size]",
        ),
        (
            lambda: torch_npu._npu_flash_attention(
                _npu(4, HEADS, D), _npu(4, 1, D), _npu(4, 1, D), mask, seq, 1.0, HEADS, KV_HEADS, _npu(4, HEADS, D)
            ),
            "_npu_flash_attention: key has 1 heads, not 2",
        ),
        (
            lambda: torch_npu._npu_flash_attention(
                _npu(5, HEADS, D),
                _npu(5, KV_HEADS, D),
                _npu(5, KV_HEADS, D),
                mask,
                seq,
                1.0,
                HEADS,
                KV_HEADS,
                _npu(5, HEADS, D),
            ),
            "_npu_flash_attention: seq_len sums to 4, the query has 5 tokens",
        ),
        (
            lambda: torch_npu._npu_flash_attention_unpad(
                _npu(4, HEADS, D), _npu(4, 1, D), _npu(4, 1, D), seq, 1.0, HEADS, KV_HEADS, _npu(4, HEADS, D)
            ),
            "_npu_flash_attention_unpad: key has 1 heads, not 2",
        ),
        (
            lambda: torch_npu._npu_flash_attention_v3(
                *(_npu(4, HEADS, D),) * 3, mask, seq, 1.0, HEADS, HEADS, mask_type=1, out=_npu(4, HEADS, D)
            ),  # fmt: skip
            "mask_type only supports MASK_TYPE_NORM_COMPRESS, but got: 1",
        ),
        (
            lambda: torch_npu._npu_flash_attention_unpad_v2(
                *(_npu(4, HEADS, D),) * 3, seq, 1.0, HEADS, HEADS, kernel_type=1, out=_npu(4, HEADS, D)
            ),  # fmt: skip
            "kernel_type only supports KERNELTYPE_DEFAULT(0) and KERNELTYPE_EXP_M8V2(2), but got: 1",
        ),
        (
            lambda: torch_npu._npu_paged_attention_splitfuse_v2(
                _npu(2, HEADS, D),
                key_cache,
                value_cache,
                table[:2],
                torch.tensor([3, 3]),
                mask,
                torch.tensor([1, 1]),
                KV_HEADS,
                HEADS,
                1.0,
                mask_type=1,
                out=_npu(2, HEADS, 5),
            ),  # fmt: skip
            "mask_type only supports MASK_TYPE_NORM_COMPRESS(5), but got: MASK_TYPE_NORM(1)",
        ),
        (
            lambda: torch_npu._npu_paged_attention_splitfuse(
                _npu(5, HEADS, D),
                key_cache,
                value_cache,
                table[:2],
                torch.tensor([3, 3]),
                _npu(5, 4),
                seq,
                KV_HEADS,
                HEADS,
                1.0,
                _npu(5, HEADS, 5),
            ),
            "_npu_paged_attention_splitfuse: seq_len sums to 4, the query has 5",
        ),
        (
            lambda: torch_npu._npu_paged_attention_splitfuse(
                _npu(4, 3, D),
                key_cache,
                value_cache,
                table[:2],
                torch.tensor([3, 3]),
                mask,
                seq,
                KV_HEADS,
                HEADS,
                1.0,
                _npu(4, HEADS, 5),
            ),
            "_npu_paged_attention_splitfuse: query must be [tokens, 4, head_size]",
        ),
    ]


def test_bad_arguments_name_what_is_wrong():
    for call, message in _bad_atb_calls():
        raises_operator_error(call, message)


def _prefill_reference(query, key_cache, value_cache, block_table, contexts, new, bias_of, scale):
    """Each sequence's `new` tokens against its first `contexts` cache rows, bias_of(context, new) added, in float32
    with the probabilities rounded to the query's dtype."""
    keys, values = (c[block_table.long()].flatten(1, 2).float() for c in (key_cache, value_cache))
    expected, start = [], 0
    for i, (c, n) in enumerate(zip(contexts, new, strict=True)):
        q = query[start : start + n].float().transpose(0, 1)
        k = keys[i, :c].repeat_interleave(HEADS // KV_HEADS, dim=1).transpose(0, 1)
        v = values[i, :c].repeat_interleave(HEADS // KV_HEADS, dim=1).transpose(0, 1)
        p = torch.softmax(q @ k.transpose(1, 2) * scale + bias_of(c, n), dim=-1).to(query.dtype).float()
        expected.append((p @ v).transpose(0, 1).to(query.dtype))
        start += n
    return torch.cat(expected)


@pytest.mark.parametrize("mask_form", ["rows", "square", "compressed"])
def test_paged_attention_splitfuse_attends_to_the_context_and_causally_to_the_new_tokens(mask_form):
    """_npu_paged_attention_splitfuse with a row or square mask; _npu_paged_attention_splitfuse_v2 with ATB's
    compressed causal mask."""
    query_all, key_cache, value_cache, block_table = _paged_inputs()
    contexts, new = [9, 2, 5], [3, 1, 2]  # each sequence's cached rows, the last `new` of them this step's tokens
    query = query_all.repeat(3, 1, 1)[: sum(new)]
    longest = max(contexts)
    square = torch.triu(torch.full((longest, longest), -10000.0), 1)
    rows = torch.cat([square[c - n : c] for c, n in zip(contexts, new, strict=True)])
    mask = {"rows": rows, "square": square, "compressed": torch.triu(torch.ones(128, 128), 1)}[mask_form]
    out = torch.empty(sum(new), HEADS, 5, dtype=torch.float16, device="npu")
    args = (query.npu(), key_cache.npu(), value_cache.npu(), block_table.npu(), torch.tensor(contexts))
    lengths = (mask.half().npu(), torch.tensor(new), KV_HEADS, HEADS, 0.4)
    if mask_form == "compressed":
        torch_npu._npu_paged_attention_splitfuse_v2(*args, *lengths, out=out)
    else:
        torch_npu._npu_paged_attention_splitfuse(*args, *lengths, out)
    expected = _prefill_reference(
        query,
        key_cache,
        value_cache,
        block_table,
        contexts,
        new,
        lambda c, n: square[c - n : c, :c].half().float(),
        0.4,
    )
    torch.testing.assert_close(out.cpu(), expected, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("version", [1, 2])
def test_flash_attention_qlens_attends_causally_over_the_prefix_cache(version):
    """_npu_flash_attention_qlens and its second version torch_npu.atb._npu_flash_attention_prefix_v2."""
    g = torch.Generator().manual_seed(3)
    block_size, contexts, new = 128, [150, 131], [22, 3]
    key_cache = torch.randn(4, block_size, KV_HEADS, D, generator=g).bfloat16()
    value_cache = torch.randn(4, block_size, KV_HEADS, D, generator=g).bfloat16()
    block_table = torch.tensor([[2, 0], [1, 3]], dtype=torch.int32)
    query = torch.randn(sum(new), HEADS, D, generator=g).bfloat16()
    out = torch.empty(sum(new), HEADS, D, dtype=torch.bfloat16, device="npu")
    compressed = torch.triu(torch.ones(128, 128), 1).bfloat16()
    args = (query.npu(), key_cache.npu(), value_cache.npu(), block_table.npu(), compressed.npu())
    if version == 1:
        torch_npu._npu_flash_attention_qlens(
            *args, torch.tensor(new), torch.tensor(contexts), KV_HEADS, HEADS, 0.3, out
        )
    else:
        options = dict(num_kv_heads=KV_HEADS, num_heads=HEADS, scale_value=0.3)
        assert torch_npu.atb._npu_flash_attention_prefix_v2(*args, new, contexts, out=out, **options) is out

    def causal(c, n):
        later = torch.arange(c)[None, :] > torch.arange(c - n, c)[:, None]
        return torch.zeros(later.shape).masked_fill(later, float("-inf"))

    expected = _prefill_reference(query, key_cache, value_cache, block_table, contexts, new, causal, 0.3)
    torch.testing.assert_close(out.cpu(), expected, atol=1e-2, rtol=1e-2)
    small = torch.zeros(4, 64, KV_HEADS, D, dtype=torch.bfloat16, device="npu")
    raises_operator_error(
        lambda: torch_npu._npu_flash_attention_qlens(
            args[0], small, small, *args[3:], torch.tensor(new), torch.tensor(contexts), KV_HEADS, HEADS, 0.3, out
        ),
        "_npu_flash_attention_qlens: the prefix-encoder kernel needs blockSize=128, got a key_cache of block size 64",
    )


def test_mla_decode_reads_values_from_the_leading_latent_dims_and_siso_fills_its_cache():
    g = torch.Generator().manual_seed(4)
    latent, rope = 6, 2
    rows = torch.randn(3, 1, latent + rope, generator=g).half()
    cache = torch.zeros(BLOCKS, BLOCK_SIZE, 1, latent + rope, dtype=torch.float16)
    slots = torch.tensor([1, 6, 13], dtype=torch.int32)
    npu_cache = cache.npu()
    torch_npu._npu_reshape_and_cache_siso(rows.npu(), npu_cache, slots.npu())
    assert torch.equal(npu_cache.cpu(), _cache_reference(rows, cache, slots))
    query = torch.randn(2, HEADS, latent + rope, generator=g).half()
    block_table = torch.tensor([[0, 1], [3, 2]], dtype=torch.int32)
    lengths = torch.tensor([7, 2], dtype=torch.int32)
    out = torch.empty(2, HEADS, latent, dtype=torch.float16, device="npu")
    torch_npu._npu_paged_attention_mla(query.npu(), npu_cache, 1, HEADS, 0.5, block_table.npu(), lengths, latent, out)
    full = npu_cache.cpu()
    expected = _paged_reference(query, full, full[..., :latent], block_table, lengths, 0.5, kv_heads=1)
    torch.testing.assert_close(out.cpu(), expected, atol=2e-3, rtol=2e-3)
