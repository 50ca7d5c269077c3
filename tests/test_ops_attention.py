"""torch_npu attention operators against a plain composition written here:
softmax(scale * q @ k^T + pse - 10000 * mask) @ v, computed per layout, mask mode and dtype."""

import math

import pytest
import torch
from op_check import check_op

import torch_npu

B, N, S, D = 2, 4, 6, 8


def ref_attention(q, k, v, scale, mask=None, pse=None):
    """q/k/v [B, N, S, D] (k/v may have fewer heads)."""
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], 1)
    s = q.float() @ k.float().transpose(-1, -2)
    if pse is not None:
        s = s + pse
    s = s * scale
    if mask is not None:
        s = s + mask.float() * -10000.0
    return (torch.softmax(s, -1) @ v.float()).to(q.dtype), torch.logsumexp(s, -1, keepdim=True)


def ref_softmax_stats(q, k, scale, mask=None):
    """torch_npu's softmax_max / softmax_sum: the row maximum of the scores and the sum of exp(s - max)."""
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
    s = (q.float() @ k.float().transpose(-1, -2)) * scale
    if mask is not None:
        s = s + mask.float() * -10000.0
    row_max = s.amax(-1, keepdim=True)
    return row_max, torch.exp(s - row_max).sum(-1, keepdim=True)


def to_layout(t, layout):
    b, n, s, d = t.shape
    return {
        "BNSD": t,
        "BSND": t.transpose(1, 2).contiguous(),
        "BSH": t.transpose(1, 2).reshape(b, s, n * d),
        "SBH": t.permute(2, 0, 1, 3).reshape(s, b, n * d),
    }[layout]


def qkv(seed=0, heads=N, kv_heads=N, s1=S, s2=S, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(B, heads, s1, D, generator=g).to(dtype),
        torch.randn(B, kv_heads, s2, D, generator=g).to(dtype),
        torch.randn(B, kv_heads, s2, D, generator=g).to(dtype),
    )


@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "SBH"])
def test_fusion_attention_layouts_forward_and_backward(layout):
    q, k, v = qkv()
    scale = 1 / math.sqrt(D)

    def ref(q, k, v):
        bq, bk, bv = (from_layout(t, layout) for t in (q, k, v))
        out, _ = ref_attention(bq, bk, bv, scale)
        row_max, row_sum = ref_softmax_stats(bq.detach(), bk.detach(), scale)
        return to_layout(out, layout), row_max.expand(B, N, S, 8), row_sum.expand(B, N, S, 8)

    def op(q, k, v):
        out, smax, ssum, _, _, _, _ = torch_npu.npu_fusion_attention(q, k, v, N, layout, scale=scale)
        return out, smax, ssum

    check_op(op, tuple(to_layout(t, layout) for t in (q, k, v)), ref, grad=(0, 1, 2), atol=1e-5, rtol=1e-5)


def from_layout(t, layout):
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.transpose(1, 2)
    if layout == "BSH":
        return t.view(t.shape[0], t.shape[1], -1, D).transpose(1, 2)
    return t.view(t.shape[0], t.shape[1], -1, D).permute(1, 2, 0, 3)


@pytest.mark.parametrize("sparse_mode", [0, 1, 2, 3, 4])
def test_fusion_attention_sparse_modes(sparse_mode):
    q, k, v = qkv(1, s1=4, s2=6)
    g = torch.Generator().manual_seed(5)
    given = torch.rand(4, 6, generator=g) > 0.7
    i, j = torch.arange(4)[:, None], torch.arange(6)[None, :]
    pre, nxt = (1, 2) if sparse_mode in (0, 4) else (2147483647, 2147483647)
    expected_mask = {
        0: given | (j < i - pre) | (j > i + nxt),
        1: given,
        2: j > i,
        3: j > i + 2,
        4: (j < i - pre) | (j > i + nxt),
    }[sparse_mode]

    def ref(q, k, v, mask):
        return ref_attention(q, k, v, 0.5, expected_mask)[0]

    def op(q, k, v, mask):
        return torch_npu.npu_fusion_attention(
            q, k, v, N, "BNSD", atten_mask=mask, scale=0.5, pre_tockens=pre, next_tockens=nxt, sparse_mode=sparse_mode
        )[0]

    check_op(op, (q, k, v, given), ref, grad=(0, 1, 2))
    outputs = torch_npu.npu_fusion_attention(
        q.npu(),
        k.npu(),
        v.npu(),
        N,
        "BNSD",
        atten_mask=given.npu(),
        scale=0.5,
        pre_tockens=pre,
        next_tockens=nxt,
        sparse_mode=sparse_mode,
    )
    for got, want in zip(outputs[1:3], ref_softmax_stats(q, k, 0.5, expected_mask)):
        assert got.dtype == torch.float32 and got.shape == (B, N, 4, 8)
        torch.testing.assert_close(got.cpu(), want.expand(B, N, 4, 8), atol=1e-5, rtol=1e-5)


def test_fusion_attention_softmax_stats_rebuild_the_softmax_and_merge_like_ring_attention():
    """softmax = exp(s - softmax_max) / softmax_sum; two halves of the keys merge into the whole (GQA)."""
    q, k, v = qkv(7, heads=4, kv_heads=2, s2=10)
    full = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 4, "BNSD", scale=0.4)
    parts = [
        torch_npu.npu_fusion_attention(q.npu(), k[:, :, half].npu(), v[:, :, half].npu(), 4, "BNSD", scale=0.4)
        for half in (slice(0, 5), slice(5, 10))
    ]
    (o1, m1, s1), (o2, m2, s2) = ((p[0].cpu(), p[1].cpu()[..., :1], p[2].cpu()[..., :1]) for p in parts)
    row_max = torch.maximum(m1, m2)
    w1, w2 = s1 * torch.exp(m1 - row_max), s2 * torch.exp(m2 - row_max)
    merged = (o1 * w1 + o2 * w2) / (w1 + w2)
    torch.testing.assert_close(merged, full[0].cpu(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(row_max, full[1].cpu()[..., :1])
    torch.testing.assert_close(w1 + w2, full[2].cpu()[..., :1], atol=1e-5, rtol=1e-5)
    scores = (q @ k.repeat_interleave(2, 1).transpose(-1, -2)) * 0.4
    torch.testing.assert_close(
        torch.exp(scores - full[1].cpu()[..., :1]) / full[2].cpu()[..., :1],
        torch.softmax(scores, -1),
        atol=1e-6,
        rtol=1e-5,
    )


def test_fusion_attention_without_mask_ignores_the_band():
    q, k, v = qkv(2)
    out = torch_npu.npu_fusion_attention(
        q.npu(), k.npu(), v.npu(), N, "BNSD", scale=0.3, pre_tockens=0, next_tockens=0
    )[0]
    torch.testing.assert_close(out.cpu(), ref_attention(q, k, v, 0.3)[0], atol=1e-5, rtol=1e-5)


def test_fusion_attention_gqa_pse_and_prefix():
    q, k, v = qkv(3, heads=4, kv_heads=2)
    pse = torch.randn(1, 4, S, S)

    def ref(q, k, v, pse):
        return ref_attention(q, k, v, 0.25, None, pse)[0]

    check_op(
        lambda q, k, v, pse: torch_npu.npu_fusion_attention(q, k, v, 4, "BNSD", pse=pse, scale=0.25)[0],
        (q, k, v, pse),
        ref,
        grad=(0, 1, 2, 3),
    )
    prefix = [2, 5]
    out = torch_npu.npu_fusion_attention(
        q.npu(), k.npu(), v.npu(), 4, "BNSD", scale=0.25, sparse_mode=5, prefix=prefix
    )[0]
    i, j = torch.arange(S)[:, None], torch.arange(S)[None, :]
    masks = torch.stack([(j > i) & (j >= p) for p in prefix])[:, None]
    torch.testing.assert_close(out.cpu(), ref_attention(q, k, v, 0.25, masks)[0], atol=1e-5, rtol=1e-5)


def test_fusion_attention_tnd_varlen_causal():
    g = torch.Generator().manual_seed(4)
    lengths = [3, 5]
    q, k, v = (torch.randn(8, N, D, generator=g) for _ in range(3))
    cum = [3, 8]

    def ref(q, k, v):
        outs = []
        start = 0
        for n in lengths:
            qs, ks, vs = (t[start : start + n].transpose(0, 1)[None] for t in (q, k, v))
            mask = torch.arange(n)[None, :] > torch.arange(n)[:, None]
            outs.append(ref_attention(qs, ks, vs, 0.5, mask)[0][0].transpose(0, 1))
            start += n
        return torch.cat(outs)

    def op(q, k, v):
        return torch_npu.npu_fusion_attention(
            q, k, v, N, "TND", scale=0.5, sparse_mode=3, actual_seq_qlen=cum, actual_seq_kvlen=cum
        )[0]

    check_op(op, (q, k, v), ref, grad=(0, 1, 2))
    _, row_max, row_sum = torch_npu.npu_fusion_attention(
        q.npu(), k.npu(), v.npu(), N, "TND", scale=0.5, sparse_mode=3, actual_seq_qlen=cum, actual_seq_kvlen=cum
    )[:3]
    assert row_max.shape == row_sum.shape == (8, N, 8)
    start = 0
    for n in lengths:
        qs, ks = (t[start : start + n].transpose(0, 1)[None] for t in (q, k))
        want = ref_softmax_stats(qs, ks, 0.5, torch.arange(n)[None, :] > torch.arange(n)[:, None])
        for got, w in zip((row_max, row_sum), want):
            torch.testing.assert_close(
                got.cpu()[start : start + n], w[0].transpose(0, 1).expand(n, N, 8), atol=1e-5, rtol=1e-5
            )
        start += n


def test_fusion_attention_dropout_is_reproducible_from_seed():
    q, k, v = (t.npu().requires_grad_() for t in qkv(6))
    torch.manual_seed(11)
    out1, _, _, _, seed, offset, numels = torch_npu.npu_fusion_attention(q, k, v, N, "BNSD", scale=0.3, keep_prob=0.8)
    torch.manual_seed(11)
    out2 = torch_npu.npu_fusion_attention(q, k, v, N, "BNSD", scale=0.3, keep_prob=0.8)[0]
    assert torch.equal(out1.detach().cpu(), out2.detach().cpu()) and seed != 0 and numels == B * N * S * S
    dy = torch.randn_like(out1)
    out1.backward(dy)
    dq, dk, dv, _, _ = torch_npu.npu_fusion_attention_grad(
        q.detach(), k.detach(), v.detach(), dy, N, "BNSD", scale_value=0.3, keep_prob=0.8, seed=seed
    )
    torch.testing.assert_close(q.grad.cpu(), dq.cpu())
    # with a fixed seed the dropout mask is independent of the npu generator
    a = torch_npu.npu_fusion_attention(q, k, v, N, "BNSD", scale=0.3, keep_prob=0.5, seed=123)[0]
    b = torch_npu.npu_fusion_attention(q, k, v, N, "BNSD", scale=0.3, keep_prob=0.5, seed=123)[0]
    assert torch.equal(a.detach().cpu(), b.detach().cpu())


@pytest.mark.parametrize(
    "bad,match",
    [
        ({"input_layout": "BHSD"}, "input_layout must be one of"),
        ({"head_num": 3}, "not divisible by 3 heads|does not match"),
        ({"keep_prob": 0.0}, "keep_prob must be in"),
    ],
)
def test_fusion_attention_bad_arguments_name_the_argument(bad, match):
    q, k, v = (to_layout(t, "BSH").npu() for t in qkv())
    kwargs = {"head_num": N, "input_layout": "BSH"}
    kwargs.update(bad)
    with pytest.raises(RuntimeError, match=match):
        torch_npu.npu_fusion_attention(q, k, v, kwargs.pop("head_num"), kwargs.pop("input_layout"), **kwargs)


@pytest.mark.parametrize("layout", ["BSH", "BNSD", "BNSD_BSND"])
def test_prompt_flash_attention(layout):
    q, k, v = qkv(7, heads=4, kv_heads=2)
    in_layout = layout.split("_")[0]
    mask = torch.ones(S, S, dtype=torch.bool).triu(1)

    def ref(q, k, v, atten_mask):
        out = ref_attention(
            from_layout(q, in_layout),
            from_layout(k, in_layout),
            from_layout(v, in_layout),
            1 / math.sqrt(D),
            atten_mask,
        )[0]
        return to_layout(out, "BSND" if layout == "BNSD_BSND" else in_layout)

    def op(q, k, v, atten_mask):
        return torch_npu.npu_prompt_flash_attention(
            q,
            k,
            v,
            atten_mask=atten_mask,
            num_heads=4,
            num_key_value_heads=2,
            scale_value=1 / math.sqrt(D),
            input_layout=layout,
        )

    check_op(op, tuple(to_layout(t, in_layout) for t in (q, k, v)), ref, kwargs={"atten_mask": mask})


def test_prompt_flash_attention_actual_lengths():
    q, k, v = qkv(8)
    out = torch_npu.npu_prompt_flash_attention(
        q.npu(),
        k.npu(),
        v.npu(),
        num_heads=N,
        input_layout="BNSD",
        scale_value=0.5,
        actual_seq_lengths=[4, 6],
        actual_seq_lengths_kv=[3, 6],
    )
    kv_mask = torch.stack([torch.arange(S) >= 3, torch.arange(S) >= 6])[:, None, None, :]
    want = ref_attention(q, k, v, 0.5, kv_mask)[0]
    want[0, :, 4:] = 0
    torch.testing.assert_close(out.cpu(), want, atol=1e-5, rtol=1e-5)


def test_incre_flash_attention_contiguous_and_paged():
    g = torch.Generator().manual_seed(9)
    q = torch.randn(B, 1, N * D, generator=g)
    k, v = torch.randn(B, 8, N * D, generator=g), torch.randn(B, 8, N * D, generator=g)
    lengths = [5, 8]
    out = torch_npu.npu_incre_flash_attention(
        q.npu(), k.npu(), v.npu(), num_heads=N, scale_value=0.4, actual_seq_lengths=lengths
    )
    kv_mask = torch.stack([torch.arange(8) >= n for n in lengths])[:, None, None, :]
    want = to_layout(
        ref_attention(from_layout(q, "BSH"), from_layout(k, "BSH"), from_layout(v, "BSH"), 0.4, kv_mask)[0], "BSH"
    )
    torch.testing.assert_close(out.cpu(), want, atol=1e-5, rtol=1e-5)
    # the same cache split into 4-token blocks, stored out of order
    block_size = 4
    blocks_k = torch.cat([k[1, 4:], k[0, :4], k[1, :4], k[0, 4:]]).view(4, block_size, N * D)
    blocks_v = torch.cat([v[1, 4:], v[0, :4], v[1, :4], v[0, 4:]]).view(4, block_size, N * D)
    table = torch.tensor([[1, 3], [2, 0]], dtype=torch.int32)
    paged = torch_npu.npu_incre_flash_attention(
        q.npu(),
        blocks_k.npu(),
        blocks_v.npu(),
        num_heads=N,
        scale_value=0.4,
        actual_seq_lengths=lengths,
        block_table=table.npu(),
        block_size=block_size,
    )
    torch.testing.assert_close(paged.cpu(), want, atol=1e-5, rtol=1e-5)


def test_fused_infer_attention_score_prefill_decode_and_lse():
    q, k, v = qkv(10)
    out, lse = torch_npu.npu_fused_infer_attention_score(
        q.npu(), k.npu(), v.npu(), num_heads=N, scale=0.5, input_layout="BNSD", sparse_mode=3, softmax_lse_flag=True
    )
    causal = torch.ones(S, S, dtype=torch.bool).triu(1)
    want, want_lse = ref_attention(q, k, v, 0.5, causal)
    torch.testing.assert_close(out.cpu(), want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.cpu(), want_lse, atol=1e-5, rtol=1e-5)
    out, lse = torch_npu.npu_fused_infer_attention_score(
        q[:, :, -1:].npu(), k.npu(), v.npu(), num_heads=N, scale=0.5, input_layout="BNSD"
    )
    torch.testing.assert_close(out.cpu(), ref_attention(q[:, :, -1:], k, v, 0.5)[0], atol=1e-5, rtol=1e-5)
    assert lse.shape == (1,) and lse.dtype == torch.float32  # op-plugin's placeholder when not requested
    with pytest.raises(
        RuntimeError,
        match=r"antiquant_scale must stack the key's and the value's parameters as " r"\[2, \.\.\.\], got \(1,\)",
    ):
        torch_npu.npu_fused_infer_attention_score(
            q.npu(), k.npu(), v.npu(), num_heads=N, antiquant_scale=torch.ones(1, device="npu")
        )
    with pytest.raises(RuntimeError, match="key_shared_prefix is not supported by vnpu"):
        torch_npu.npu_fused_infer_attention_score(q.npu(), k.npu(), v.npu(), num_heads=N, key_shared_prefix=k.npu())


def _int8(t, step):
    return (t / step).round().clamp(-128, 127).to(torch.int8)


@pytest.mark.parametrize("layout", ["BSH", "BNSD", "BSND"])
def test_incre_and_fused_infer_attention_dequantise_an_int8_kv_cache_per_channel(layout):
    g = torch.Generator().manual_seed(21)
    q = torch.randn(B, N, 1, D, generator=g).half()
    k, v = torch.randn(B, N, 8, D, generator=g), torch.randn(B, N, 8, D, generator=g)
    scales = torch.rand(2, N, 1, D, generator=g) * 0.02 + 0.01  # per channel (head, dim)
    offsets = torch.randint(-3, 3, (2, N, 1, D), generator=g).float()
    k8, v8 = _int8(k, scales[0]), _int8(v, scales[1])
    k_deq, v_deq = ((t8.float() + offsets[i]) * scales[i] for i, t8 in enumerate((k8, v8)))
    want = ref_attention(q, k_deq.half(), v_deq.half(), 0.3)[0]
    shape = {"BSH": (2, N * D), "BNSD": (2, N, 1, D), "BSND": (2, N, D)}[layout]
    per_channel = {
        "BSH": lambda t: t.permute(0, 2, 1, 3).reshape(2, N * D),
        "BNSD": lambda t: t,
        "BSND": lambda t: t.reshape(2, N, D),
    }[layout]
    qa, ka, va = (to_layout(t, layout).npu() for t in (q, k8, v8))
    sa, oa = per_channel(scales).reshape(shape).npu(), per_channel(offsets).reshape(shape).npu()
    got = torch_npu.npu_incre_flash_attention(
        qa, ka, va, antiquant_scale=sa, antiquant_offset=oa, num_heads=N, scale_value=0.3, input_layout=layout
    )
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.cpu().float(), to_layout(want, layout).float(), atol=2e-3, rtol=2e-3)
    fia, _ = torch_npu.npu_fused_infer_attention_score(
        qa,
        ka,
        va,
        key_antiquant_scale=sa[0],
        key_antiquant_offset=oa[0],
        value_antiquant_scale=sa[1],
        value_antiquant_offset=oa[1],
        num_heads=N,
        scale=0.3,
        input_layout=layout,
    )
    assert torch.equal(fia.cpu(), got.cpu())
    compiled = torch.compile(
        lambda *a: torch_npu.npu_incre_flash_attention(
            *a[:3],
            antiquant_scale=a[3],
            antiquant_offset=a[4],
            quant_scale2=a[5],
            num_heads=N,
            scale_value=0.3,
            input_layout=layout,
        ),
        backend="aot_eager",
        fullgraph=True,
    )
    quantised = compiled(qa, ka, va, sa, oa, torch.tensor([50.0]).npu())
    assert quantised.dtype == torch.int8 and quantised.shape == got.shape
    assert torch.equal(quantised.cpu(), (got.cpu().float() * 50.0).round().clamp(-128, 127).to(torch.int8))


def test_fused_infer_attention_dequantises_per_token():
    g = torch.Generator().manual_seed(22)
    q = torch.randn(B, N, 1, D, generator=g)
    k, v = torch.randn(B, N, 8, D, generator=g), torch.randn(B, N, 8, D, generator=g)
    step = torch.rand(2, B, 8, generator=g) * 0.02 + 0.01  # per token of the cache
    k8, v8 = _int8(k, step[0][:, None, :, None]), _int8(v, step[1][:, None, :, None])
    want = ref_attention(q, k8.float() * step[0][:, None, :, None], v8.float() * step[1][:, None, :, None], 0.3)[0]
    got, _ = torch_npu.npu_fused_infer_attention_score(
        q.npu(),
        k8.npu(),
        v8.npu(),
        antiquant_scale=step.npu(),
        antiquant_mode=1,
        num_heads=N,
        scale=0.3,
        input_layout="BNSD",
    )
    torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)


def test_prompt_flash_attention_int8_attention_and_int8_output():
    g = torch.Generator().manual_seed(23)
    q8, k8, v8 = (torch.randint(-60, 60, (B, N, S, D), generator=g, dtype=torch.int8) for _ in range(3))
    deq1, quant1, deq2 = 0.002, 100.0, 0.01
    mask = torch.ones(S, S, dtype=torch.bool).triu(1)
    scores = (q8.double() @ k8.double().transpose(-1, -2)) * deq1 * 0.5 - 10000.0 * mask
    probs = torch.softmax(scores, -1)
    want = ((probs * quant1).round().clamp(-128, 127) @ v8.double()) * deq2
    got = torch_npu.npu_prompt_flash_attention(
        q8.npu(),
        k8.npu(),
        v8.npu(),
        atten_mask=mask.npu(),
        deq_scale1=torch.tensor([deq1]).npu(),
        quant_scale1=torch.tensor([quant1]).npu(),
        deq_scale2=torch.tensor([deq2]).npu(),
        num_heads=N,
        scale_value=0.5,
        input_layout="BNSD",
    )
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.cpu().double(), want, atol=0.05, rtol=2e-3)
    # the int64 form of a scale (npu_trans_quant_param: float32 bits in the low word) reads the same
    packed = torch.tensor([deq2], dtype=torch.float32).view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    again = torch_npu.npu_prompt_flash_attention(
        q8.npu(),
        k8.npu(),
        v8.npu(),
        atten_mask=mask.npu(),
        deq_scale1=torch.tensor([deq1]).npu(),
        quant_scale1=torch.tensor([quant1]).npu(),
        deq_scale2=packed.npu(),
        num_heads=N,
        scale_value=0.5,
        input_layout="BNSD",
    )
    assert torch.equal(again.cpu(), got.cpu())
    x = torch.randn(B, S, N * D, generator=g)
    scale2, offset2 = torch.rand(N * D, generator=g) * 40 + 10, torch.randint(-5, 5, (N * D,), generator=g).float()
    out8 = torch_npu.npu_prompt_flash_attention(
        x.npu(), x.npu(), x.npu(), num_heads=N, scale_value=0.3, quant_scale2=scale2.npu(), quant_offset2=offset2.npu()
    )
    plain = torch_npu.npu_prompt_flash_attention(x.npu(), x.npu(), x.npu(), num_heads=N, scale_value=0.3)
    assert out8.dtype == torch.int8
    assert torch.equal(out8.cpu(), (plain.cpu() * scale2 + offset2).round().clamp(-128, 127).to(torch.int8))
    with pytest.raises(RuntimeError, match="needs dequant_scale1, quant_scale1 and dequant_scale2 together"):
        torch_npu.npu_prompt_flash_attention(
            q8.npu(), k8.npu(), v8.npu(), deq_scale1=torch.tensor([deq1]).npu(), num_heads=N, input_layout="BNSD"
        )


def test_fusion_attention_fake_and_compile():
    q, k, v = (to_layout(t, "BSH").npu() for t in qkv(12))
    compiled = torch.compile(
        lambda q, k, v: torch_npu.npu_fusion_attention(q, k, v, N, "BSH", scale=0.2)[0],
        backend="aot_eager",
        fullgraph=True,
    )
    eager = torch_npu.npu_fusion_attention(q, k, v, N, "BSH", scale=0.2)[0]
    torch.testing.assert_close(compiled(q, k, v).cpu(), eager.cpu())
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    with mode:
        fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
        out, smax, ssum, soft, *_ = torch_npu.npu_fusion_attention(fq, fk, fv, N, "BSH", scale=0.2)
    assert out.shape == q.shape and smax.shape == (B, N, S, 8) and smax.dtype == torch.float32 and soft.numel() == 0


def test_incre_and_fused_infer_attention_fake_and_compile():
    g = torch.Generator().manual_seed(13)
    q = torch.randn(B, 1, N * D, generator=g)
    k, v = torch.randn(B, 8, N * D, generator=g), torch.randn(B, 8, N * D, generator=g)

    def ifa_ref(q, k, v):
        return to_layout(
            ref_attention(from_layout(q, "BSH"), from_layout(k, "BSH"), from_layout(v, "BSH"), 0.4)[0], "BSH"
        )

    check_op(
        lambda q, k, v: torch_npu.npu_incre_flash_attention(q, k, v, num_heads=N, scale_value=0.4), (q, k, v), ifa_ref
    )
    qb, kb, vb = qkv(14)

    def fia_ref(q, k, v):
        out, lse = ref_attention(q, k, v, 0.5)
        return out, lse

    check_op(
        lambda q, k, v: torch_npu.npu_fused_infer_attention_score(
            q, k, v, num_heads=N, scale=0.5, input_layout="BNSD", softmax_lse_flag=True
        ),
        (qb, kb, vb),
        fia_ref,
    )


def test_all_mask_mode_without_a_mask_masks_nothing():
    """sparse_mode=1 (allMask) applies the mask it is given; without one the card computes full attention
    (torch_npu's own DTensor tests call it so)."""
    q, k, v = (torch.randn(1, 2, 4, 8).npu() for _ in range(3))
    full = torch_npu.npu_fusion_attention(q, k, v, 2, "BNSD", scale=0.3)
    all_mask = torch_npu.npu_fusion_attention(q, k, v, 2, "BNSD", scale=0.3, sparse_mode=1)
    for a, b in zip(full[:3], all_mask[:3]):
        assert torch.equal(a.cpu(), b.cpu())


def test_prompt_flash_attention_in_float16_rounds_the_scores_to_float16_first():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 16).half() * 3 for _ in range(3))
    scale = 0.25
    out = torch_npu.npu_prompt_flash_attention(
        q.npu(), k.npu(), v.npu(), num_heads=2, input_layout="BNSD", scale_value=scale
    ).cpu()
    # reference written here: fp32-accumulated Q·Kᵀ rounded to float16, then scale and a float32 softmax
    scores = (q.float() @ k.float().transpose(-2, -1)).half().float() * scale
    expected = (torch.softmax(scores, -1) @ v.float()).half()
    assert torch.equal(out, expected)
    unrounded = (torch.softmax(q.float() @ k.float().transpose(-2, -1) * scale, -1) @ v.float()).half()
    assert not torch.equal(out, unrounded)  # the rounding is visible at these magnitudes
