"""DeepSeek sparse attention: npu_lightning_indexer against its scoring written out token by token (ReLU dot
products weighted per head, right-down causal mask, stable top-k), and npu_sparse_flash_attention against dense
attention whose mask keeps exactly the selected tokens, over BSND, TND and paged (PA_BSND) keys."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

B, S1, S2, N1, D, TOPK = 2, 3, 10, 4, 8, 4


def indexer_reference(q, k, w, lengths_q, lengths_k):
    """[B, S1, 1, TOPK] indices and scores, row by row."""
    idx = torch.full((B, S1, 1, TOPK), -1, dtype=torch.int32)
    val = torch.full((B, S1, 1, TOPK), float("-inf"))
    for b in range(B):
        s1, s2 = lengths_q[b], lengths_k[b]
        for i in range(s1):
            scores = []
            for j in range(s2):
                if j > i + (s2 - s1):
                    continue
                score = sum(
                    float(w[b, i, h]) * max(float(q[b, i, h].float() @ k[b, j, 0].float()), 0.0) for h in range(N1)
                )
                scores.append((-score, j))
            for slot, (neg, j) in enumerate(sorted(scores)[:TOPK]):
                idx[b, i, 0, slot], val[b, i, 0, slot] = j, -neg
    return idx, val


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, S1, N1, D, generator=g), torch.randn(B, S2, 1, D, generator=g), torch.rand(B, S1, N1, generator=g))  # fmt: skip


def test_indexer_bsnd_and_paged_keys():
    q, k, w = _inputs(1)
    lengths_k = [S2, 7]
    want_idx, want_val = indexer_reference(q, k, w, [S1, S1], lengths_k)
    idx, val = torch_npu.npu_lightning_indexer(
        q.npu(), k.npu(), w.npu(), actual_seq_lengths_key=torch.tensor(lengths_k, dtype=torch.int32).npu(),
        sparse_count=TOPK, return_value=True,
    )  # fmt: skip
    assert torch.equal(idx.cpu(), want_idx)
    torch.testing.assert_close(val.cpu(), want_val, atol=1e-4, rtol=1e-4)
    block = 4  # the same keys in a paged cache, batch 1's blocks first
    pages = torch.zeros(6, block, 1, D)
    table = torch.tensor([[3, 4, 5], [0, 1, 2]], dtype=torch.int32)
    for b in range(B):
        pages[table[b].long()] = torch.nn.functional.pad(k[b], (0, 0, 0, 0, 0, 3 * block - S2)).reshape(3, block, 1, D)
    paged, empty = torch_npu.npu_lightning_indexer(
        q.npu(), pages.npu(), w.npu(), actual_seq_lengths_key=torch.tensor(lengths_k, dtype=torch.int32).npu(),
        block_table=table.npu(), layout_key="PA_BSND", sparse_count=TOPK,
    )  # fmt: skip
    assert torch.equal(paged.cpu(), want_idx) and empty.numel() == 0


def dense_with_mask(q, k, v, qr, kr, indices, scale):
    out = torch.zeros(B, S1, N1, v.shape[-1])
    for b in range(B):
        keep = torch.zeros(S1, S2, dtype=torch.bool)
        for i in range(S1):
            for j in indices[b, i, 0].tolist():
                if 0 <= j <= i + (S2 - S1):
                    keep[i, j] = True
        scores = (
            torch.einsum("ihd,jd->hij", q[b], k[b, :, 0]) + torch.einsum("ihd,jd->hij", qr[b], kr[b, :, 0])
        ) * scale
        probs = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1)
        out[b] = torch.einsum("hij,jd->ihd", probs, v[b, :, 0])
    return out


@pytest.mark.parametrize("layout", ["BSND", "TND"])
def test_sparse_flash_attention_equals_masked_dense_attention(layout):
    q, k, w = _inputs(2)
    g = torch.Generator().manual_seed(3)
    qr, kr = torch.randn(B, S1, N1, 4, generator=g), torch.randn(B, S2, 1, 4, generator=g)
    v = k.clone()  # MLA absorb: key and value share their data
    indices = torch.stack([torch.stack([torch.randperm(S2, generator=g)[:TOPK] for _ in range(S1)]) for _ in range(B)])[:, :, None].to(torch.int32)  # fmt: skip
    indices[0, 0, 0, -1] = -1
    want = dense_with_mask(q, k, v, qr, kr, indices, 0.3)
    args = dict(query_rope=qr, key_rope=kr, attention_mode=2, return_softmax_lse=True)
    if layout == "TND":
        flat = lambda t: t.reshape(B * t.shape[1], *t.shape[2:])  # noqa: E731
        lengths = dict(actual_seq_lengths_query=torch.tensor([S1, 2 * S1], dtype=torch.int32).npu(),
                       actual_seq_lengths_kv=torch.tensor([S2, 2 * S2], dtype=torch.int32).npu())  # fmt: skip
        out, smax, ssum = torch_npu.npu_sparse_flash_attention(
            flat(q).npu(), flat(k).npu(), flat(v).npu(), flat(indices).npu(), 0.3, layout_query="TND", layout_kv="TND",
            query_rope=flat(qr).npu(), key_rope=flat(kr).npu(), attention_mode=2, return_softmax_lse=True, **lengths,
        )  # fmt: skip
        torch.testing.assert_close(out.cpu(), flat(want), atol=1e-5, rtol=1e-5)
        assert smax.shape == (1, B * S1, N1)
        return
    out, smax, ssum = torch_npu.npu_sparse_flash_attention(q.npu(), k.npu(), v.npu(), indices.npu(), 0.3, **{n: (t.npu() if torch.is_tensor(t) else t) for n, t in args.items()})  # fmt: skip
    torch.testing.assert_close(out.cpu(), want, atol=1e-5, rtol=1e-5)
    assert smax.shape == (B, 1, S1, N1) and ssum.shape == (B, 1, S1, N1)
    raises_operator_error(
        lambda: torch_npu.npu_sparse_flash_attention(q.npu(), k.npu(), v.npu(), indices.npu(), 0.3, sparse_mode=1),
        "npu_sparse_flash_attention: sparse_mode must be 0 or 3, got 1",
    )


def test_quant_indexer_equals_the_indexer_of_the_dequantised_operands():
    q, k, w = _inputs(4)
    q_scale, k_scale = q.abs().amax(-1) / 127, k.abs().amax(-1) / 127  # per token and head
    q8 = torch.round(q / q_scale[..., None]).to(torch.int8)
    k8 = torch.round(k / k_scale[..., None]).to(torch.int8)
    want, _ = indexer_reference(q8.float() * q_scale[..., None], k8.float() * k_scale[..., None], w, [S1, S1], [S2, S2])
    got = torch_npu.npu_quant_lightning_indexer(q8.npu(), k8.npu(), w.npu(), q_scale.npu(), k_scale.npu(), 0, 0, sparse_count=TOPK)  # fmt: skip
    assert torch.equal(got.cpu(), want)


def test_indexer_grad_matches_autograd_of_the_selected_scores():
    q, k, w = _inputs(5)
    idx, _ = indexer_reference(q, k, w, [S1, S1], [S2, S2])
    idx[1, 0, 0, 0] = -1
    leaves = [t.clone().requires_grad_(True) for t in (q, k, w)]
    dy = torch.randn(B, S1, 1, TOPK, generator=torch.Generator().manual_seed(6))
    total = 0.0
    for b in range(B):
        for i in range(S1):
            for slot, j in enumerate(idx[b, i, 0].tolist()):
                if j < 0:
                    continue
                score = (leaves[2][b, i] * torch.relu(leaves[0][b, i] @ leaves[1][b, j, 0])).sum()
                total = total + dy[b, i, 0, slot] * score
    total.backward()
    grads = torch_npu.npu_lightning_indexer_grad(q.npu(), k.npu(), dy.npu(), idx.npu(), w.npu())
    for got, leaf in zip(grads, leaves):
        torch.testing.assert_close(got.cpu(), leaf.grad, atol=1e-5, rtol=1e-5)


def test_sparse_flash_attention_grad_matches_autograd_of_the_dense_form():
    q, k, _ = _inputs(7)
    g = torch.Generator().manual_seed(8)
    qr, kr = torch.randn(B, S1, N1, 4, generator=g), torch.randn(B, S2, 1, 4, generator=g)
    v = torch.randn(B, S2, 1, D, generator=g)
    indices = torch.stack([torch.stack([torch.randperm(S2, generator=g)[:TOPK] for _ in range(S1)]) for _ in range(B)])[:, :, None].to(torch.int32)  # fmt: skip
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v, qr, kr)]
    want = dense_with_mask(leaves[0], leaves[1], leaves[2], leaves[3], leaves[4], indices, 0.3)
    d_out = torch.randn(want.shape, generator=g)
    want.backward(d_out)
    out, smax, ssum = torch_npu.npu_sparse_flash_attention(
        q.npu(), k.npu(), v.npu(), indices.npu(), 0.3, query_rope=qr.npu(), key_rope=kr.npu(), attention_mode=2,
        return_softmax_lse=True,
    )  # fmt: skip
    grads = torch_npu.npu_sparse_flash_attention_grad(
        q.npu(), k.npu(), v.npu(), indices.npu(), d_out.npu(), out, smax, ssum, 0.3, 1, query_rope=qr.npu(),
        key_rope=kr.npu(), attention_mode=2,
    )  # fmt: skip
    for got, leaf in zip(grads, leaves):
        torch.testing.assert_close(got.cpu(), leaf.grad, atol=1e-5, rtol=1e-5)


def test_indexer_ranks_near_ties_as_the_reference_scores_them():
    """Scores one float32 ulp apart keep op-plugin's reference order: per key head the query heads' dots are one
    [heads, rows, D] @ [D, S2] matmul summed over the heads (a different contraction order swaps such pairs)."""
    g = torch.Generator().manual_seed(3)
    rows, heads, d, keys = 2, 64, 128, 8192
    q = (torch.rand(rows, heads, d, generator=g) * 20 - 10).bfloat16()
    k = (torch.rand(keys, 1, d, generator=g) * 20 - 10).bfloat16()
    w = (torch.rand(rows, heads, generator=g) * 2 - 1).bfloat16()
    score = (torch.relu(q.transpose(0, 1).float() @ k[:, 0].float().t()) * w.t().float()[..., None]).sum(0)
    score[0, keys - 1 :] = float("-inf")  # right-down causal: row 0 sees one key fewer
    gaps = score.sort(dim=1, descending=True).values[:, :2048].diff(dim=1).abs()
    assert (gaps[torch.isfinite(gaps)] < score.abs().max() * 2**-22).any()  # the case holds near ties
    want = score.sort(dim=1, descending=True, stable=True).indices[:, :2048].int()
    lengths = torch.tensor([rows], dtype=torch.int32)
    idx, _ = torch_npu.npu_lightning_indexer(
        q.npu(), k.npu(), w.npu(), actual_seq_lengths_query=lengths.npu(),
        actual_seq_lengths_key=torch.tensor([keys], dtype=torch.int32).npu(), layout_query="TND", layout_key="TND",
    )  # fmt: skip
    assert torch.equal(idx.cpu().reshape(rows, 2048), want)


def test_sparse_flash_attention_sinks_take_their_share_of_each_softmax():
    """sinks: one logit per query head, a key without a value in every row's softmax (a row whose keys are all
    masked attends to the sink alone and comes out zero)."""
    q, k, w = _inputs(4)
    g = torch.Generator().manual_seed(5)
    qr, kr = torch.randn(B, S1, N1, 4, generator=g), torch.randn(B, S2, 1, 4, generator=g)
    sinks = torch.randn(N1, generator=g) * 3
    indices = torch.stack([torch.stack([torch.randperm(S2, generator=g)[:TOPK] for _ in range(S1)]) for _ in range(B)])[:, :, None].to(torch.int32)  # fmt: skip
    indices[1, 2, 0] = -1
    want = torch.zeros(B, S1, N1, D)
    for b in range(B):
        keep = torch.zeros(S1, S2, dtype=torch.bool)
        for i in range(S1):
            for j in indices[b, i, 0].tolist():
                keep[i, j] = 0 <= j <= i + (S2 - S1)
        scores = (torch.einsum("ihd,jd->hij", q[b], k[b, :, 0]) + torch.einsum("ihd,jd->hij", qr[b], kr[b, :, 0])) * 0.3
        scores = torch.cat([scores.masked_fill(~keep, float("-inf")), sinks[:, None, None].expand(N1, S1, 1)], -1)
        want[b] = torch.einsum("hij,jd->ihd", torch.softmax(scores, -1)[..., :-1], k[b, :, 0])
    out, smax, ssum = torch_npu.npu_sparse_flash_attention(
        q.npu(), k.npu(), k.npu(), indices.npu(), 0.3, query_rope=qr.npu(), key_rope=kr.npu(), sinks=sinks.npu(),
        return_softmax_lse=True,
    )  # fmt: skip
    torch.testing.assert_close(out.cpu(), want, atol=1e-5, rtol=1e-5)
    assert torch.equal(out.cpu()[1, 2], torch.zeros(N1, D))
    assert torch.equal(smax.cpu()[1, 0, 2], sinks) and torch.equal(ssum.cpu()[1, 0, 2], torch.ones(N1))
    raises_operator_error(
        lambda: torch_npu.npu_sparse_flash_attention(
            q.npu(), k.npu(), k.npu(), indices.npu(), 0.3, sinks=sinks[:2].npu()
        ),
        f"npu_sparse_flash_attention: sinks must be [N1={N1}], got (2,)",
    )


def test_quant_indexer_scores_in_the_cards_precision():
    """int8 operands: the exact integer dot products, ReLU, / 1024 rounded to float16, the heads weighted by
    weights * query scale (a float16 product) and summed in float32, times the key's scale (op-plugin's golden);
    dequantising first ranks near ties differently."""
    g = torch.Generator().manual_seed(7)
    rows, heads, d, keys, top = 4, 64, 128, 4096, 256
    q8 = torch.randint(-128, 128, (1, rows, heads, d), generator=g, dtype=torch.int8)
    k8 = torch.randint(-128, 128, (1, keys, 1, d), generator=g, dtype=torch.int8)
    q_scale = (torch.rand(1, rows, heads, generator=g) * 10).half()
    k_scale = (torch.rand(1, keys, 1, generator=g) * 10).half()
    w = (torch.rand(1, rows, heads, generator=g) * 0.01).half()
    dots = torch.relu(q8[0].transpose(0, 1).int() @ k8[0, :, 0].int().t()).float() / 1024.0  # [heads, rows, keys]
    scaled = torch.bmm((w[0] * q_scale[0]).float()[:, None, :], dots.half().float().transpose(0, 1))[:, 0]
    score = (scaled * k_scale[0, :, 0].float()).masked_fill(
        torch.arange(keys)[None, :] > torch.arange(rows)[:, None] + (keys - rows), float("-inf")
    )
    want = score.sort(dim=1, descending=True, stable=True).indices[:, :top].int()
    got = torch_npu.npu_quant_lightning_indexer(
        q8.npu(), k8.npu(), w.npu(), q_scale.npu(), k_scale.npu(), 0, 0, sparse_count=top
    )  # fmt: skip
    assert torch.equal(got.cpu().reshape(rows, top), want)
