"""_npu_paged_attention_quant (op-plugin's ATB decode over int8 KV caches) against a reference written here one
sequence and one head at a time, for both quantisation modes, and its argument errors."""

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu

BLOCKS, BLOCK_SIZE, HEADS, KV_HEADS, D = 6, 4, 4, 2, 8


def _rows(cache, table, length):
    return torch.stack([cache[int(table[j // BLOCK_SIZE]), j % BLOCK_SIZE] for j in range(length)])  # [L, KV, D]


def _inputs(query_dtype):
    g = torch.Generator().manual_seed(3)
    if query_dtype == torch.int8:
        query = torch.randint(-4, 5, (3, HEADS, D), generator=g, dtype=torch.int8)
    else:
        query = torch.randn(3, HEADS, D, generator=g).to(query_dtype)
    key_cache = torch.randint(-8, 9, (BLOCKS, BLOCK_SIZE, KV_HEADS, D), generator=g, dtype=torch.int8)
    value_cache = torch.randint(-8, 9, (BLOCKS, BLOCK_SIZE, KV_HEADS, D), generator=g, dtype=torch.int8)
    table = torch.stack([torch.randperm(BLOCKS, generator=g)[:3] for _ in range(3)]).int()
    return query, key_cache, value_cache, table, torch.tensor([5, 0, 11], dtype=torch.int32)


def _reference(query, key_cache, value_cache, table, lengths, scale, quant_type, k_descale, v_descale, out_dtype):
    out = torch.zeros(query.shape, dtype=out_dtype)
    for b, length in enumerate(lengths.tolist()):
        if length == 0:
            continue
        keys, values = _rows(key_cache, table[b], length).float(), _rows(value_cache, table[b], length).float()
        for h in range(HEADS):
            kv = h // (HEADS // KV_HEADS)
            q = query[b, h].float()
            if quant_type == 1:
                k = keys[:, kv] * k_descale.view(KV_HEADS, D)[kv]
                v = values[:, kv] * v_descale.view(KV_HEADS, D)[kv]
                p = torch.softmax(k @ q * scale, dim=0).to(query.dtype).float()
                out[b, h] = (p @ v).to(out_dtype)
            else:
                s = (keys[:, kv] @ q) * k_descale[h] * scale
                e = torch.exp(s - s.max())
                p8 = torch.round((e / (e.max() / 127.0)).half().float())
                out[b, h] = ((p8 @ values[:, kv]) * v_descale[h] * e.max() / 127.0 / e.sum()).to(out_dtype)
    return out


@pytest.mark.parametrize(
    ("quant_type", "query_dtype", "out_dtype"),
    [(1, torch.float16, torch.float16), (1, torch.bfloat16, torch.bfloat16), (3, torch.int8, torch.bfloat16)],
)
def test_decode_over_int8_caches_dequantises_as_the_quant_type_says(quant_type, query_dtype, out_dtype):
    query, key_cache, value_cache, table, lengths = _inputs(query_dtype)
    channels = HEADS if quant_type == 3 else KV_HEADS * D
    k_descale, v_descale = torch.rand(channels) + 0.5, torch.rand(channels) + 0.5
    out = torch.full(query.shape, 0.1, dtype=out_dtype, device="npu")
    torch_npu._npu_paged_attention_quant(
        query.npu(), key_cache.npu(), value_cache.npu(), KV_HEADS, HEADS, 0.35, table.npu(), lengths, quant_type,
        {torch.float16: 1, torch.bfloat16: 27}[out_dtype], k_descale.npu(), v_descale.npu(), out,
    )  # fmt: skip
    want = _reference(query, key_cache, value_cache, table, lengths, 0.35, quant_type, k_descale, v_descale, out_dtype)
    torch.testing.assert_close(out.cpu(), want, atol=2e-2, rtol=1e-2)


def test_int64_scales_carry_the_float32_bits_as_atb_takes_them():
    query, key_cache, value_cache, table, lengths = _inputs(torch.float16)
    k_descale, v_descale = torch.rand(KV_HEADS * D) + 0.5, torch.rand(KV_HEADS * D) + 0.5
    as_int64 = lambda s: s.view(torch.int32).long() & 0xFFFFFFFF  # noqa: E731
    outs = []
    for k, v in ((k_descale, v_descale), (as_int64(k_descale), as_int64(v_descale))):
        out = torch.empty(query.shape, dtype=torch.float16, device="npu")
        torch_npu._npu_paged_attention_quant(
            query.npu(), key_cache.npu(), value_cache.npu(), KV_HEADS, HEADS, 0.35, table.npu(), lengths, 1, 1,
            k.npu(), v.npu(), out,
        )  # fmt: skip
        outs.append(out.cpu())
    assert torch.equal(outs[0], outs[1])


def test_bad_arguments_name_what_is_wrong():
    query, key_cache, value_cache, table, lengths = (t.npu() for t in _inputs(torch.float16))
    scales = torch.ones(KV_HEADS * D, device="npu")
    out = torch.empty(query.shape, dtype=torch.float16, device="npu")
    common = (query, key_cache, value_cache, KV_HEADS, HEADS, 0.35, table, lengths)
    raises_operator_error(
        lambda: torch_npu._npu_paged_attention_quant(*common, 2, 1, scales, scales, out),
        "_npu_paged_attention_quant: quant_type must be 1 (dequantisation fused) or 3 (online QKV quantisation), got 2",
    )
    raises_operator_error(
        lambda: torch_npu._npu_paged_attention_quant(*common, 1, 27, scales, scales, out),
        "_npu_paged_attention_quant: outdata_type 27 does not name out's dtype torch.float16",
    )
