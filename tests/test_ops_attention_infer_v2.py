"""npu_fused_infer_attention_score_v2 (attention sinks, packed and paged TND as vLLM-Ascend calls it, sliding
windows), the .out overloads with their workspace, and _infer_output, against softmax compositions written here."""

import pytest
import torch
from op_check import check_op

import torch_npu

N, KV_HEADS, D = 4, 2, 8


def ref_rows(q, k, v, scale, mask=None, sink=None):
    """One sequence: q [S1, N, D], k/v [S2, N_kv, D] -> (out [S1, N, D], lse [S1, N, 1]); the sink, one score
    per head, joins each row's softmax with a zero value."""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], 1)
    s = torch.einsum("ind,jnd->nij", q.double(), k.double()) * scale
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    if sink is not None:
        s = torch.cat([s, sink.double().view(-1, 1, 1).expand(-1, s.shape[1], 1)], -1)
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(s, -1)[..., : k.shape[0]]
    out = torch.einsum("nij,jnd->ind", p, v.double())
    return out.to(q.dtype), lse.transpose(0, 1).unsqueeze(-1).float()


def causal(s1, s2):
    """Bottom-right aligned causal mask (True = masked)."""
    return torch.ones(s1, s2, dtype=torch.bool).triu(s2 - s1 + 1)


def test_v2_equals_v1_under_its_new_argument_names():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, n * D, generator=g) for n in (N, KV_HEADS, KV_HEADS))
    mask = torch.rand(2, 5, 5, generator=g) > 0.7
    v1 = torch_npu.npu_fused_infer_attention_score(
        q.npu(),
        k.npu(),
        v.npu(),
        atten_mask=mask.npu(),
        actual_seq_lengths_kv=[5, 3],
        num_heads=N,
        num_key_value_heads=KV_HEADS,
        scale=0.3,
        softmax_lse_flag=True,
    )
    v2 = torch_npu.npu_fused_infer_attention_score_v2(
        q.npu(),
        k.npu(),
        v.npu(),
        atten_mask=mask.npu(),
        actual_seq_kvlen=[5, 3],
        num_query_heads=N,
        num_key_value_heads=KV_HEADS,
        softmax_scale=0.3,
        return_softmax_lse=True,
    )
    for a, b in zip(v1, v2):
        assert torch.equal(a.cpu(), b.cpu())


def test_learnable_sink_joins_every_softmax():
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(1, N, 3, D, generator=g), torch.randn(1, N, 7, D, generator=g), torch.randn(1, N, 7, D)
    sink = torch.tensor([0.5, -1.0, 2.0, 4.0])
    out, lse = torch_npu.npu_fused_infer_attention_score_v2(
        q.npu(),
        k.npu(),
        v.npu(),
        learnable_sink=sink.npu(),
        num_query_heads=N,
        softmax_scale=0.35,
        input_layout="BNSD",
        return_softmax_lse=True,
    )
    want, want_lse = ref_rows(q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1), 0.35, sink=sink)
    torch.testing.assert_close(out.cpu()[0].transpose(0, 1), want, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(lse.cpu()[0].transpose(0, 1), want_lse, atol=1e-6, rtol=1e-5)
    plain, _ = torch_npu.npu_fused_infer_attention_score_v2(
        q.npu(), k.npu(), v.npu(), num_query_heads=N, softmax_scale=0.35, input_layout="BNSD"
    )
    assert (out.cpu().norm(dim=-1) < plain.cpu().norm(dim=-1)).all()  # the sink takes probability mass


def test_sink_attention_fake_kernel_and_compile():
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 3, n, D, generator=g) for n in (N, KV_HEADS, KV_HEADS))
    sink = torch.randn(N, generator=g)

    def op(q, k, v, sink):
        return torch_npu.npu_fused_infer_attention_score_v2(
            q,
            k,
            v,
            learnable_sink=sink,
            num_query_heads=N,
            num_key_value_heads=KV_HEADS,
            softmax_scale=0.3,
            input_layout="BSND",
            return_softmax_lse=True,
        )

    def reference(q, k, v, sink):
        rows = [ref_rows(q[b], k[b], v[b], 0.3, sink=sink) for b in range(q.shape[0])]
        return torch.stack([r[0] for r in rows]), torch.stack([r[1].transpose(0, 1) for r in rows])

    check_op(op, (q, k, v, sink), reference, atol=1e-5, rtol=1e-5)


def _packed(lengths, heads, g):
    return torch.randn(sum(lengths), heads, D, generator=g)


def _cumulative(lengths):
    return torch.tensor(lengths).cumsum(0).tolist()


def card_cache_layout(cache, layout, tile=4):
    """A cache of [blocks, block_size, KV_N, D] rows (vLLM-Ascend's) in one of the card's paged layouts: BnBsH
    (vLLM-Ascend's `key_cache.view(num_block, block_size, -1)`), BnNBsD, or NZ (blocks, KV_N, D/tile,
    block_size, tile) — the card's tile is 16 values (32 for int8); vnpu reads it from the last dimension."""
    blocks, block_size, heads, d = cache.shape
    if layout == "BnBsH":
        return cache.reshape(blocks, block_size, heads * d)
    per_head = cache.permute(0, 2, 1, 3)  # [blocks, KV_N, block_size, D]
    if layout == "BnNBsD":
        return per_head.contiguous()
    return per_head.reshape(blocks, heads, block_size, d // tile, tile).transpose(2, 3).contiguous()


@pytest.mark.parametrize("layout", ["BnBsH", "BnNBsD", "NZ"])
def test_tnd_paged_prefill_with_causal_mask_and_sinks(layout):
    """vLLM-Ascend's chunked prefill: packed queries (cumulative lengths), a paged KV cache addressed through
    block_table with each request's own KV length, sparse_mode 3 and attention sinks; each of the card's three
    cache layouts."""
    g = torch.Generator().manual_seed(2)
    q_lens, kv_lens, block_size = [3, 1, 4], [5, 9, 4], 4
    q = _packed(q_lens, N, g)
    cache_k, cache_v = (torch.randn(12, block_size, KV_HEADS, D, generator=g) for _ in range(2))
    block_table = torch.tensor([[7, 2, 0], [1, 5, 9], [11, 0, 0]], dtype=torch.int32)
    sink = torch.randn(N, generator=g)
    mask = torch.ones(2048, 2048, dtype=torch.bool).triu(1)
    out, lse = torch_npu.npu_fused_infer_attention_score_v2(
        q.npu(),
        card_cache_layout(cache_k, layout).npu(),
        card_cache_layout(cache_v, layout).npu(),
        atten_mask=mask.npu(),
        actual_seq_qlen=_cumulative(q_lens),
        actual_seq_kvlen=kv_lens,
        block_table=block_table.npu(),
        block_size=block_size,
        learnable_sink=sink.npu(),
        num_query_heads=N,
        num_key_value_heads=KV_HEADS,
        softmax_scale=D**-0.5,
        input_layout="TND",
        sparse_mode=3,
        return_softmax_lse=True,
    )
    start = 0
    for b, (s1, s2) in enumerate(zip(q_lens, kv_lens)):
        k = cache_k[block_table[b].long()].reshape(-1, KV_HEADS, D)[:s2]
        v = cache_v[block_table[b].long()].reshape(-1, KV_HEADS, D)[:s2]
        want, want_lse = ref_rows(q[start : start + s1], k, v, D**-0.5, causal(s1, s2), sink)
        torch.testing.assert_close(out.cpu()[start : start + s1], want, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(lse.cpu()[start : start + s1], want_lse, atol=1e-5, rtol=1e-5)
        start += s1


def test_tnd_packed_sliding_window():
    g = torch.Generator().manual_seed(3)
    lengths, window = [6, 4], 2
    q, k, v = _packed(lengths, N, g), _packed(lengths, KV_HEADS, g), _packed(lengths, KV_HEADS, g)
    out, _ = torch_npu.npu_fused_infer_attention_score_v2(
        q.npu(),
        k.npu(),
        v.npu(),
        actual_seq_qlen=_cumulative(lengths),
        actual_seq_kvlen=_cumulative(lengths),
        atten_mask=torch.ones(2048, 2048, dtype=torch.bool).triu(1).npu(),
        num_query_heads=N,
        num_key_value_heads=KV_HEADS,
        softmax_scale=0.4,
        pre_tokens=window,
        next_tokens=0,
        input_layout="TND",
        sparse_mode=4,
    )
    start = 0
    for s in lengths:
        i, j = torch.arange(s).unsqueeze(1), torch.arange(s).unsqueeze(0)
        band = (j > i) | (j < i - window)
        rows = slice(start, start + s)
        want, _ = ref_rows(q[rows], k[rows], v[rows], 0.4, band)
        torch.testing.assert_close(out.cpu()[rows], want, atol=1e-5, rtol=1e-5)
        start += s


def test_int8_kv_cache_dequantised_per_channel_and_per_token():
    g = torch.Generator().manual_seed(4)
    q = torch.randn(2, 1, N * D, generator=g, dtype=torch.float16)
    k8, v8 = (torch.randint(-100, 100, (2, 6, KV_HEADS * D), generator=g, dtype=torch.int8) for _ in range(2))
    key_scale = torch.rand(KV_HEADS * D, generator=g) / 50
    value_scale = torch.rand(2, 6, generator=g) / 50
    out, _ = torch_npu.npu_fused_infer_attention_score_v2(
        q.npu(),
        k8.npu(),
        v8.npu(),
        dequant_scale_key=key_scale.npu(),
        dequant_scale_value=value_scale.npu(),
        key_quant_mode=0,
        value_quant_mode=1,
        num_query_heads=N,
        num_key_value_heads=KV_HEADS,
        softmax_scale=0.3,
    )
    k = (k8.float() * key_scale).half()
    v = (v8.float() * value_scale.unsqueeze(-1)).half()
    want, _ = torch_npu.npu_fused_infer_attention_score_v2(
        q.npu(), k.npu(), v.npu(), num_query_heads=N, num_key_value_heads=KV_HEADS, softmax_scale=0.3
    )
    assert torch.equal(out.cpu(), want.cpu())


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_out_overload_with_workspace_and_infer_output(version):
    """The aclgraph path: size the workspace, allocate the outputs with _infer_output, call .out."""
    g = torch.Generator().manual_seed(5)
    q, k, v = torch.randn(2, 3, N * D, generator=g), torch.randn(2, 5, N * D, generator=g), torch.randn(2, 5, N * D)
    args = (q.npu(), k.npu(), v.npu())
    if version == "v1":
        kw = {"num_heads": N, "scale": 0.5, "softmax_lse_flag": True}
        eager = torch_npu.npu_fused_infer_attention_score(*args, **kw)
        workspace = torch.ops.npu._npu_fused_infer_attention_score_get_max_workspace(*args, **kw)
        outs = torch.ops.npu._npu_fused_infer_attention_score_infer_output(
            q.npu(), v.npu(), num_heads=N, softmax_lse_flag=True
        )
        op = torch.ops.npu.npu_fused_infer_attention_score.out
    else:
        kw = {"num_query_heads": N, "softmax_scale": 0.5, "return_softmax_lse": True}
        eager = torch_npu.npu_fused_infer_attention_score_v2(*args, **kw)
        workspace = torch.ops.npu._npu_fused_infer_attention_score_v2_get_max_workspace(*args, **kw)
        outs = torch.ops.npu._npu_fused_infer_attention_score_v2_infer_output(
            q.npu(), v.npu(), num_query_heads=N, return_softmax_lse=True
        )
        op = torch.ops.npu.npu_fused_infer_attention_score_v2.out
    assert workspace.device.type == "npu" and workspace.numel() == 0
    for planned, got in zip(outs, eager):
        assert planned.shape == got.shape and planned.dtype == got.dtype and planned.device == got.device
    result = op(*args, **kw, workspace=workspace, attention_out=outs[0], softmax_lse=outs[1])
    assert result[0] is outs[0] and result[1] is outs[1]
    for a, b in zip(outs, eager):
        assert torch.equal(a.cpu(), b.cpu())


@pytest.mark.parametrize(
    "layout, query_shape, value_shape, paged, want",
    [
        ("BNSD_BSND", (2, N, 3, D), (2, KV_HEADS, 5, 16), False, (2, 3, N, 16)),
        ("TND", (7, N, D), (12, 4, KV_HEADS * 16), True, (7, N, 16)),
        ("TND_NTD", (7, N, D), (9, KV_HEADS, 16), False, (N, 7, 16)),
        ("BSND_NBSD", (2, 3, N, D), (2, 5, KV_HEADS, 16), False, (N, 2, 3, 16)),
    ],
)
def test_infer_output_layouts(layout, query_shape, value_shape, paged, want):
    block_table = torch.zeros(2, 3, dtype=torch.int32, device="npu") if paged else None
    out, lse = torch.ops.npu._npu_fused_infer_attention_score_v2_infer_output(
        torch.empty(query_shape, dtype=torch.float16, device="npu"),
        torch.empty(value_shape, dtype=torch.float16, device="npu"),
        input_layout=layout,
        block_table=block_table,
        num_query_heads=N,
        num_key_value_heads=KV_HEADS,
        quant_scale_out=torch.ones(1, device="npu"),
    )
    assert out.shape == want and out.dtype == torch.int8 and lse.numel() == 0


def test_unrequested_softmax_lse_is_op_plugins_placeholder():
    # The first version hands back a one-element softmax_lse when softmax_lse_flag is off, the second an empty one;
    # the out forms leave the caller's placeholder alone.
    q = torch.randn(1, N, 1, D, device="npu")
    k = torch.randn(1, KV_HEADS, 5, D, device="npu")
    out, lse = torch_npu.npu_fused_infer_attention_score(q, k, k, num_heads=N, num_key_value_heads=KV_HEADS,
                                                         input_layout="BNSD")  # fmt: skip
    assert lse.shape == (1,) and lse.dtype == torch.float32
    planned = torch.ops.npu._npu_fused_infer_attention_score_infer_output(q, k, input_layout="BNSD", num_heads=N)
    assert planned[0].shape == out.shape and planned[1].shape == (1,)
    with torch._subclasses.FakeTensorMode() as mode:
        fq, fk = mode.from_tensor(q), mode.from_tensor(k)
        traced = torch.ops.npu.npu_fused_infer_attention_score(fq, fk, fk, num_heads=N, num_key_value_heads=KV_HEADS,
                                                               input_layout="BNSD")  # fmt: skip
        assert traced[1].shape == (1,)
    v2 = torch_npu.npu_fused_infer_attention_score_v2(q, k, k, num_query_heads=N, num_key_value_heads=KV_HEADS,
                                                      input_layout="BNSD")  # fmt: skip
    assert v2[1].numel() == 0
    placeholder = torch.full((1,), 7.0, device="npu")
    attention_out = torch.empty_like(out)
    torch.ops.npu.npu_fused_infer_attention_score.out(q, k, k, num_heads=N, num_key_value_heads=KV_HEADS,
                                                      input_layout="BNSD", attention_out=attention_out,
                                                      softmax_lse=placeholder)  # fmt: skip
    assert torch.equal(attention_out.cpu(), out.cpu()) and placeholder.item() == 7.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dequant_scale_query": torch.ones(1)}, "dequant_scale_query is not supported by vnpu"),
        ({"quant_scale_p": torch.ones(1)}, "quant_scale_p is not supported by vnpu"),
        ({"out_dtype": 1}, r"out_dtype \(float8 / hifloat8 inputs\) is not supported by vnpu"),
        ({"learnable_sink": torch.ones(3)}, r"learnable_sink must hold one value per query head \(4\), got 3"),
        (
            {"input_layout": "TND", "actual_seq_qlen": [2]},
            "layout TND needs actual_seq_qlen and actual_seq_kvlen",
        ),
        (
            {"input_layout": "TND", "actual_seq_qlen": [2], "actual_seq_kvlen": [2], "atten_mask": torch.ones(2, 2)},
            "layout TND takes atten_mask only with sparse_mode 2, 3 or 4",
        ),
    ],
)
def test_errors_name_the_operator(kwargs, message):
    q = torch.randn(2, N, D, device="npu")
    kwargs = {key: value.npu() if isinstance(value, torch.Tensor) else value for key, value in kwargs.items()}
    layout = kwargs.pop("input_layout", "BSND")
    query = q if layout == "TND" else q.unsqueeze(0)
    with pytest.raises(RuntimeError, match=f"^npu_fused_infer_attention_score_v2: {message}"):
        torch_npu.npu_fused_infer_attention_score_v2(
            query, query, query, num_query_heads=N, input_layout=layout, **kwargs
        )


def test_incre_flash_attention_output_dtype_while_tracing():
    # torch_npu's meta rule: an int8 query gives float16, quant_scale2 gives int8, otherwise the query's dtype.
    with torch._subclasses.FakeTensorMode():
        q8 = torch.randint(1, 40, (1, 128), dtype=torch.int8, device="npu")
        assert torch.ops.npu.npu_incre_flash_attention(q8, q8, q8).dtype == torch.float16
        q = torch.randn(1, 4, 1, 8, dtype=torch.bfloat16, device="npu")
        assert torch.ops.npu.npu_incre_flash_attention(q, q, q).dtype == torch.bfloat16
        scale2 = torch.ones(1, device="npu")
        out = torch.ops.npu.npu_incre_flash_attention(q, q, q, quant_scale2=scale2, input_layout="BNSD")
        assert out.dtype == torch.int8 and out.shape == q.shape


@pytest.mark.parametrize("layout", ["BnBsH", "BnNBsD", "NZ"])
def test_mla_decode_over_a_paged_cache_joins_the_rope_parts_head_by_head(layout):
    """vLLM-Ascend's MLA decode: q_nope / q_pe (BNSD_NBSD) against the k_nope cache (also the value) and the k_pe
    cache through block_table; the rope parts' dot products join the scores head by head, the value's heads keep
    their own width. Two key/value heads, so that a join of whole rows instead of heads would show."""
    g = torch.Generator().manual_seed(4)
    batch, heads, kv_heads, dim, rope, block_size = 2, 4, 2, 8, 4, 4
    q, q_pe = torch.randn(batch, heads, 1, dim, generator=g), torch.randn(batch, heads, 1, rope, generator=g)
    k_nope = torch.randn(6, block_size, kv_heads, dim, generator=g)
    k_pe = torch.randn(6, block_size, kv_heads, rope, generator=g)
    block_table = torch.tensor([[4, 1], [0, 5]], dtype=torch.int32)
    lengths, scale = [7, 3], 0.3
    out, _ = torch_npu.npu_fused_infer_attention_score_v2(
        q.npu(),
        card_cache_layout(k_nope, layout).npu(),
        card_cache_layout(k_nope, layout).npu(),
        query_rope=q_pe.npu(),
        key_rope=card_cache_layout(k_pe, layout).npu(),
        num_query_heads=heads,
        num_key_value_heads=kv_heads,
        input_layout="BNSD_NBSD",
        softmax_scale=scale,
        block_table=block_table.npu(),
        block_size=block_size,
        actual_seq_kvlen=lengths,
    )
    assert out.shape == (heads, batch, 1, dim)
    for b, s2 in enumerate(lengths):
        k = k_nope[block_table[b].long()].reshape(-1, kv_heads, dim)[:s2].repeat_interleave(heads // kv_heads, 1)
        kr = k_pe[block_table[b].long()].reshape(-1, kv_heads, rope)[:s2].repeat_interleave(heads // kv_heads, 1)
        scores = (
            torch.einsum("nd,jnd->nj", q[b, :, 0].double(), k.double())
            + torch.einsum("nd,jnd->nj", q_pe[b, :, 0].double(), kr.double())
        ) * scale
        want = torch.einsum("nj,jnd->nd", torch.softmax(scores, -1), k.double())
        torch.testing.assert_close(out.cpu()[:, b, 0], want.float(), atol=1e-5, rtol=1e-5)


def test_mla_with_packed_bsh_queries_and_a_bnbsh_cache_joins_the_rope_parts_head_by_head():
    """The same join where heads sit side by side in the last dimension (BSH queries, a BnBsH cache)."""
    g = torch.Generator().manual_seed(5)
    heads, kv_heads, dim, rope, dv, block_size = 4, 2, 8, 4, 6, 4
    q, q_pe = torch.randn(1, 1, heads * dim, generator=g), torch.randn(1, 1, heads * rope, generator=g)
    k = torch.randn(3, block_size, kv_heads, dim, generator=g)
    kr = torch.randn(3, block_size, kv_heads, rope, generator=g)
    v = torch.randn(3, block_size, kv_heads, dv, generator=g)
    block_table = torch.tensor([[2, 0]], dtype=torch.int32)
    out, _ = torch_npu.npu_fused_infer_attention_score(
        q.npu(),
        k.flatten(2).npu(),
        v.flatten(2).npu(),
        query_rope=q_pe.npu(),
        key_rope=kr.flatten(2).npu(),
        num_heads=heads,
        num_key_value_heads=kv_heads,
        scale=0.5,
        block_table=block_table.npu(),
        block_size=block_size,
        actual_seq_lengths_kv=[6],
    )
    rows = block_table[0].long()
    kk, kkr, vv = (t[rows].reshape(-1, kv_heads, t.shape[-1])[:6].repeat_interleave(2, 1) for t in (k, kr, v))
    scores = (
        torch.einsum("nd,jnd->nj", q.view(heads, dim).double(), kk.double())
        + torch.einsum("nd,jnd->nj", q_pe.view(heads, rope).double(), kkr.double())
    ) * 0.5
    want = torch.einsum("nj,jnd->nd", torch.softmax(scores, -1), vv.double())
    torch.testing.assert_close(out.cpu().view(heads, dv), want.float(), atol=1e-5, rtol=1e-5)


def test_ntd_input_with_tnd_output_and_a_narrower_value():
    """NTD_TND (heads first in, tokens first out), as op-plugin's golden test calls it: two packed sequences, key
    heads wider than value heads (MLA's 192 / 128 in that test)."""
    g = torch.Generator().manual_seed(6)
    lengths = [3, 5]
    q = torch.randn(N, sum(lengths), 12, generator=g)
    k = torch.randn(KV_HEADS, sum(lengths), 12, generator=g)
    v = torch.randn(KV_HEADS, sum(lengths), D, generator=g)
    out, _ = torch_npu.npu_fused_infer_attention_score_v2(
        q.npu(),
        k.npu(),
        v.npu(),
        num_query_heads=N,
        num_key_value_heads=KV_HEADS,
        input_layout="NTD_TND",
        softmax_scale=0.25,
        actual_seq_qlen=_cumulative(lengths),
        actual_seq_kvlen=_cumulative(lengths),
    )
    assert out.shape == (sum(lengths), N, D)
    start = 0
    for s in lengths:
        rows = slice(start, start + s)
        want, _ = ref_rows(q[:, rows].transpose(0, 1), k[:, rows].transpose(0, 1), v[:, rows].transpose(0, 1), 0.25)
        torch.testing.assert_close(out.cpu()[rows], want, atol=1e-5, rtol=1e-5)
        start += s


@pytest.mark.parametrize("layout", ["BnNBsD", "NZ"])
def test_int8_paged_cache_with_per_channel_antiquant_reads_alike_in_each_layout(layout):
    """vLLM-Ascend's C8 decode: an int8 paged cache dequantised per channel ([1, KV_N, 1, D] scales) inside
    npu_fused_infer_attention_score — the NZ cache with the card's int8 tile of 32 — gives the BnBsH cache's output bit
    for bit, and that output is the attention over the dequantised rows (written out here)."""
    g = torch.Generator().manual_seed(7)
    batch, heads, kv_heads, dim, block_size, blocks = 3, 4, 2, 64, 8, 6
    q = torch.randn(batch, heads, 1, dim, generator=g).half()
    k8, v8 = (
        torch.randint(-128, 128, (blocks, block_size, kv_heads, dim), generator=g, dtype=torch.int8) for _ in "kv"
    )
    ks, vs = ((torch.rand(1, kv_heads, 1, dim, generator=g) / 100).half() for _ in "kv")
    block_table = torch.tensor([[0, 1], [2, 3], [5, 4]], dtype=torch.int32)
    lengths = [9, 16, 3]

    def attention(cache_layout):
        out, _ = torch_npu.npu_fused_infer_attention_score(
            q.npu(),
            card_cache_layout(k8, cache_layout, tile=32).npu(),
            card_cache_layout(v8, cache_layout, tile=32).npu(),
            key_antiquant_scale=ks.npu(),
            value_antiquant_scale=vs.npu(),
            key_antiquant_mode=0,
            value_antiquant_mode=0,
            block_table=block_table.npu(),
            actual_seq_lengths_kv=lengths,
            num_heads=heads,
            num_key_value_heads=kv_heads,
            input_layout="BNSD",
            scale=0.125,
            block_size=block_size,
        )
        return out.cpu()

    out = attention(layout)
    assert torch.equal(out, attention("BnBsH"))
    for b, s2 in enumerate(lengths):
        rows = block_table[b].long()
        k = (k8[rows].reshape(-1, kv_heads, dim)[:s2].float() * ks.view(kv_heads, dim).float()).repeat_interleave(2, 1)
        v = (v8[rows].reshape(-1, kv_heads, dim)[:s2].float() * vs.view(kv_heads, dim).float()).repeat_interleave(2, 1)
        weights = (torch.einsum("nd,jnd->nj", q[b, :, 0].float(), k) * 0.125).softmax(-1)
        torch.testing.assert_close(out[b, :, 0].float(), torch.einsum("nj,jnd->nd", weights, v), atol=2e-3, rtol=2e-3)
