"""The second-generation ATB attention operators under torch_npu.atb (_npu_paged_attention_v2,
_npu_flash_attention_v2) against references written here one sequence and one head at a time, an NPU graph's
task update of the paged one, and their argument errors."""

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu

HEADS, KV_HEADS, D, DV, BLOCKS, BLOCK_SIZE = 4, 2, 8, 6, 8, 4


def _softmax_attention(q, k, v, scale, bias):
    """One head: q [S, D], k [T, D], v [T, Dv], bias [S, T]; probabilities rounded to q's dtype."""
    p = torch.softmax(q.float() @ k.float().t() * scale + bias.float(), dim=-1).to(q.dtype).float()
    return p @ v.float()


def _paged_inputs():
    g = torch.Generator().manual_seed(5)
    query = torch.randn(2, HEADS, D, generator=g).half()
    key_cache = torch.randn(BLOCKS, BLOCK_SIZE, KV_HEADS, D, generator=g).half()
    value_cache = torch.randn(BLOCKS, BLOCK_SIZE, KV_HEADS, DV, generator=g).half()
    table = torch.stack([torch.randperm(BLOCKS, generator=g)[:3] for _ in range(2)]).int()
    alibi = torch.randn(2, HEADS, 1, 12, generator=g).half()
    return query, key_cache, value_cache, table, alibi


def _paged_reference(query, key_cache, value_cache, table, lengths, alibi, scale):
    out = torch.zeros(query.shape[0], HEADS, DV, dtype=query.dtype)
    for b, length in enumerate(lengths):
        rows = [(int(table[b, j // BLOCK_SIZE]), j % BLOCK_SIZE) for j in range(length)]
        keys, values = torch.stack([key_cache[r] for r in rows]), torch.stack([value_cache[r] for r in rows])
        for h in range(HEADS):
            kv = h // (HEADS // KV_HEADS)
            bias = alibi[b, h, :, :length] if alibi is not None else torch.zeros(1, length)
            out[b, h] = _softmax_attention(query[b, h : h + 1], keys[:, kv], values[:, kv], scale, bias)[0].half()
    return out


@pytest.mark.parametrize("mask_type", [0, 2])
def test_paged_attention_v2_adds_the_alibi_mask_and_returns_out(mask_type):
    query, key_cache, value_cache, table, alibi = _paged_inputs()
    out = torch.empty(2, HEADS, DV, dtype=torch.float16, device="npu")
    returned = torch_npu.atb._npu_paged_attention_v2(
        query.npu(), key_cache.npu(), table.npu(), [7, 12], value_cache=value_cache.npu(),
        mask=alibi.npu() if mask_type else None, num_kv_heads=KV_HEADS, num_heads=HEADS, scale_value=0.4,
        mask_type=mask_type, out=out,
    )  # fmt: skip
    assert returned is out
    want = _paged_reference(query, key_cache, value_cache, table, [7, 12], alibi if mask_type else None, 0.4)
    torch.testing.assert_close(out.cpu(), want, atol=2e-3, rtol=2e-3)


def test_a_graph_task_update_replays_the_paged_attention_with_new_lengths():
    query, key_cache, value_cache, table, alibi = (t.npu() for t in _paged_inputs())
    options = dict(value_cache=value_cache, mask=alibi, num_kv_heads=KV_HEADS, num_heads=HEADS, scale_value=0.4, mask_type=2)  # fmt: skip
    eager, captured = (torch.empty(2, HEADS, DV, dtype=torch.float16, device="npu") for _ in range(2))
    torch_npu.atb._npu_paged_attention_v2(query, key_cache, table, [3, 5], out=eager, **options)
    workspace = torch_npu.atb._npu_paged_attention_v2_get_workspace(query, key_cache, table, [3, 5], out=captured, **options)  # fmt: skip
    graph, update_stream = torch.npu.NPUGraph(), torch.npu.Stream()
    with torch.npu.graph(graph):
        stream = torch.npu.current_stream()
        torch.npu.graph_task_group_begin(stream)
        torch_npu.atb._npu_paged_attention_v2(query, key_cache, table, [12, 12], workspace=workspace, out=captured, **options)  # fmt: skip
        handle = torch.npu.graph_task_group_end(stream)
    with torch.npu.stream(update_stream):
        torch.npu.graph_task_update_begin(update_stream, handle)
        torch_npu.atb._npu_paged_attention_v2(query, key_cache, table, [3, 5], workspace=workspace, out=captured, **options)  # fmt: skip
        torch.npu.graph_task_update_end(update_stream)
    graph.replay()
    assert torch.equal(captured.cpu(), eager.cpu())


@pytest.mark.parametrize("mask_type", [1, 2])
def test_flash_attention_v2_adds_a_norm_or_per_head_alibi_mask_to_each_packed_sequence(mask_type):
    g = torch.Generator().manual_seed(6)
    lengths = [3, 5]
    query = torch.randn(8, HEADS * D, generator=g).half()  # heads flattened into the last dim, as engines pass them
    key, value = torch.randn(8, KV_HEADS * D, generator=g).half(), torch.randn(8, KV_HEADS * DV, generator=g).half()
    mask = torch.randn(2, 5, 5, generator=g).half() if mask_type == 1 else torch.randn(2, HEADS, 5, 5, generator=g).half()  # fmt: skip
    out = torch.empty(8, HEADS * DV, dtype=torch.float16, device="npu")
    torch_npu.atb._npu_flash_attention_v2(
        query.npu(), key.npu(), value.npu(), lengths, mask=mask.npu(), mask_type=mask_type, scale_value=0.3,
        num_heads=HEADS, num_kv_heads=KV_HEADS, out=out,
    )  # fmt: skip
    want, start = torch.zeros(8, HEADS, DV, dtype=torch.float16), 0
    for b, n in enumerate(lengths):
        rows = slice(start, start + n)
        q, k, v = query[rows].view(n, HEADS, D), key[rows].view(n, KV_HEADS, D), value[rows].view(n, KV_HEADS, DV)
        for h in range(HEADS):
            kv = h // (HEADS // KV_HEADS)
            bias = mask[b, :n, :n] if mask_type == 1 else mask[b, h, :n, :n]
            want[rows, h] = _softmax_attention(q[:, h], k[:, kv], v[:, kv], 0.3, bias).half()
        start += n
    torch.testing.assert_close(out.cpu(), want.view(8, -1), atol=2e-3, rtol=2e-3)


def test_bad_arguments_name_what_is_wrong():
    query, key_cache, value_cache, table, alibi = (t.npu() for t in _paged_inputs())
    out = torch.empty(2, HEADS, DV, dtype=torch.float16, device="npu")
    packed = torch.zeros(4, HEADS * D, dtype=torch.float16, device="npu")
    cases = [
        (
            lambda: torch_npu.atb._npu_paged_attention_v2(
                query, key_cache, table, [1, 1], value_cache=value_cache, mask_type=1, out=out
            ),  # fmt: skip
            "_npu_paged_attention_v2: mask_type must be 0 (no mask) or 2 (alibi), got 1",
        ),
        (
            lambda: torch_npu.atb._npu_paged_attention_v2(
                query, key_cache, table, [1, 1], value_cache=value_cache, mask_type=2, out=out
            ),  # fmt: skip
            "_npu_paged_attention_v2: mask_type 2 (alibi) needs a mask",
        ),
        (
            lambda: torch_npu.atb._npu_paged_attention_v2(query, key_cache, table, [1, 1], out=out),
            "_npu_paged_attention_v2: value_cache is required: vnpu reads values from their own cache",
        ),
        (
            lambda: torch_npu.atb._npu_flash_attention_v2(
                packed, packed, packed, [4], mask=alibi, mask_type=4, out=packed
            ),  # fmt: skip
            "_npu_flash_attention_v2: mask_type must be 1 (norm) or 2 (alibi), got 4: the compressed ALiBi masks are "
            "expanded by the card's kernel, which vnpu does not model",
        ),
        (
            lambda: torch_npu.atb._npu_flash_attention_v2(packed, packed, packed, [4], mask_type=1, out=packed),
            "_npu_flash_attention_v2: mask_type 1 needs a mask",
        ),
        (
            lambda: torch_npu.atb._npu_flash_attention_v2(
                packed, packed, packed, [4], mask=alibi, kernel_type=2, out=packed
            ),  # fmt: skip
            "_npu_flash_attention_v2: kernel_type must be 0 (default) or 1 (high precision), got 2",
        ),
        (
            lambda: torch_npu.atb._npu_flash_attention_prefix_v2(
                query, key_cache, value_cache, table, alibi, [1, 1], [1, 1], mask_type=4, out=out
            ),
            "_npu_flash_attention_prefix_v2: mask_type must be 3 (compressed causal mask), got 4: the compressed ALiBi "
            "masks are expanded by the card's kernel, which vnpu does not model",
        ),
    ]
    for call, message in cases:
        raises_operator_error(call, message)


def test_the_prefix_encoder_computes_the_prefix_prefill_of_flash_attention_qlens():
    g = torch.Generator().manual_seed(9)
    contexts, new = [150, 131], [22, 3]
    key_cache, value_cache = (torch.randn(4, 128, KV_HEADS, D, generator=g).half().npu() for _ in range(2))
    table = torch.tensor([[2, 0], [1, 3]], dtype=torch.int32, device="npu")
    query = torch.randn(sum(new), HEADS, D, generator=g).half().npu()
    want = torch.empty_like(query)
    mask = torch.triu(torch.ones(128, 128), 1).half().npu()
    torch_npu._npu_flash_attention_qlens(query, key_cache, value_cache, table, mask, torch.tensor(new), torch.tensor(contexts), KV_HEADS, HEADS, 0.3, want)  # fmt: skip
    flat_caches = [
        c.flatten(2) for c in (key_cache, value_cache)
    ]  # [blocks, 128, kv hidden], as engines also pass them
    got = torch_npu.atb.npu_self_attention_prefix_encoder(query.flatten(1), *flat_caches, table, new, contexts, HEADS, 0.3, KV_HEADS)  # fmt: skip
    assert got.shape == (sum(new), HEADS * D) and torch.equal(got.cpu(), want.flatten(1).cpu())
    output = torch.empty_like(query)
    returned = torch_npu.atb.npu_self_attention_prefix_encoder(
        query, key_cache, value_cache, table, new, contexts, HEADS, 0.3, KV_HEADS, mask_type="mask_type_norm_compress", output=output
    )  # fmt: skip
    assert returned is output and torch.equal(output.cpu(), want.cpu())
    for mask_type, message in (
        (
            "mask_type_alibi_compress",
            "mask_type 'mask_type_alibi_compress' is a compressed ALiBi mask, which the card's kernel expands and vnpu does not model",
        ),  # fmt: skip
        ("causal", "Unsupported mask_type value: 'causal'"),
    ):
        raises_operator_error(
            lambda mask_type=mask_type: torch_npu.atb.npu_self_attention_prefix_encoder(
                query, key_cache, value_cache, table, new, contexts, HEADS, 0.3, KV_HEADS, mask_type=mask_type
            ),
            f"npu_self_attention_prefix_encoder: {message}",
        )
