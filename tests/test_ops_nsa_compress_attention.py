"""npu_nsa_compress_attention against op-plugin's golden written out (softmax attention with the -40000 mask,
the importance score accumulated block by block with its triangular weights, head groups summed, topk_mask forced,
stable descending top-k), over two batches of different lengths and GQA heads."""

import torch

import torch_npu


def golden(q, k, v, scale, cbs, stride, sbs, count, topk_mask, atten_mask, qlen, klen, sellen):
    n1, n2 = q.shape[1], k.shape[1]
    group, m, n = n1 // n2, sbs // stride, cbs // stride
    out = torch.zeros(q.shape[0], n1, v.shape[-1])
    topk = torch.zeros(q.shape[0], n2, count, dtype=torch.int32)
    qs = ks = 0
    for s1, s2, blocks in zip(qlen, klen, sellen):
        qi = q[qs : qs + s1].transpose(0, 1)
        ki = k[ks : ks + s2].transpose(0, 1).repeat_interleave(group, 0)
        vi = v[ks : ks + s2].transpose(0, 1).repeat_interleave(group, 0)
        s = qi @ ki.transpose(1, 2) * scale + atten_mask[:s1, :s2].float() * -40000.0
        p = torch.softmax(s, -1)
        out[qs : qs + s1] = (p @ vi).transpose(0, 1)
        score = torch.zeros(n1, s1, blocks)
        inner = m + n - 1
        for i in range(blocks, 0, -1):
            for j in range(inner):
                times = min(j + 1 if j < inner / 2 else inner - j, n)
                if 0 <= m * i - j < s2:
                    score[:, :, i - 1] += p[:, :, m * i - j] * times
        score = score.view(n2, group, s1, blocks).sum(1).masked_fill(topk_mask[:s1, :blocks], 23333.0)
        topk[qs : qs + s1] = (
            torch.sort(score, dim=-1, descending=True, stable=True).indices[..., :count].transpose(0, 1).int()
        )
        qs, ks = qs + s1, ks + s2
    return out, topk


def test_matches_the_golden():
    g = torch.Generator().manual_seed(0)
    qlen, klen, sellen = [12, 9], [20, 15], [6, 4]
    q = torch.randn(sum(qlen), 4, 8, generator=g).to(torch.float16)
    k = torch.randn(sum(klen), 2, 8, generator=g).to(torch.float16)
    v = torch.randn(sum(klen), 2, 6, generator=g).to(torch.float16)
    topk_mask = torch.eye(12, 6, dtype=torch.bool)
    topk_mask[:, 0] = True
    atten_mask = torch.triu(torch.ones(12, 20, dtype=torch.bool), diagonal=1)
    cumulative = lambda xs: [sum(xs[: i + 1]) for i in range(len(xs))]  # noqa: E731
    out, topk, smax, ssum = torch_npu.npu_nsa_compress_attention(
        q.npu(), k.npu(), v.npu(), 0.3, 4, 32, 16, 64, 3, topk_mask=topk_mask.npu(), atten_mask=atten_mask.npu(),
        actual_seq_qlen=cumulative(qlen), actual_cmp_seq_kvlen=cumulative(klen), actual_sel_seq_kvlen=cumulative(sellen),
    )  # fmt: skip
    want_out, want_topk = golden(q.float(), k.float(), v.float(), 0.3, 32, 16, 64, 3, topk_mask, atten_mask, qlen, klen, sellen)  # fmt: skip
    torch.testing.assert_close(out.cpu().float(), want_out.half().float(), rtol=2e-3, atol=2e-3)
    assert torch.equal(topk.cpu(), want_topk)
    assert smax.shape == (21, 4, 8) and ssum.shape == (21, 4, 8) and bool((smax[..., 0] == smax[..., 7]).all())
