"""npu_nsa_select_attention against op-plugin's golden written out (the named key blocks gathered per query token
and key head, softmax, probabilities rounded to the input dtype), two batches and GQA heads; gradients through
npu_nsa_select_attention_grad against autograd of the same gathering."""

import torch

import torch_npu

BLOCK, COUNT = 4, 2


def golden(q, k, v, topk, scale, qlen, kvlen, round_to=None):
    n1, n2 = q.shape[1], k.shape[1]
    group = n1 // n2
    out, smax, ssum = [], [], []
    qs = ks = 0
    for s1, s2 in zip(qlen, kvlen):
        for t in range(qs, qs + s1):
            rows = []
            for h in range(n2):
                keys = [ks + b * BLOCK + j for b in topk[t, h].tolist() for j in range(BLOCK)]
                s = q[t, h * group : (h + 1) * group] @ k[keys, h].t() * scale
                p = torch.softmax(s, -1)
                if round_to is not None:
                    p = p.to(round_to).float()
                rows.append(p @ v[keys, h])
                smax.append(s.amax(-1))
                ssum.append(torch.exp(s - s.amax(-1, keepdim=True)).sum(-1))
            out.append(torch.cat(rows))
        qs, ks = qs + s1, ks + s2
    return torch.stack(out), torch.cat(smax).reshape(-1, n1), torch.cat(ssum).reshape(-1, n1)


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    qlen, kvlen = [3, 2], [12, 8]
    q = torch.randn(5, 4, 8, generator=g).to(torch.float16)
    k = torch.randn(20, 2, 8, generator=g).to(torch.float16)
    v = torch.randn(20, 2, 6, generator=g).to(torch.float16)
    topk = torch.cat([torch.stack([torch.randperm(3, generator=g)[:COUNT] for _ in range(6)]).reshape(3, 2, COUNT),
                      torch.stack([torch.randperm(2, generator=g)[:COUNT] for _ in range(4)]).reshape(2, 2, COUNT)]).int()  # fmt: skip
    return q, k, v, topk, qlen, kvlen


def test_forward_matches_the_golden():
    q, k, v, topk, qlen, kvlen = inputs()
    cumulative = lambda xs: [sum(xs[: i + 1]) for i in range(len(xs))]  # noqa: E731
    out, smax, ssum = torch_npu.npu_nsa_select_attention(
        q.npu(), k.npu(), v.npu(), topk.npu(), 0.5, 4, BLOCK, COUNT, actual_seq_qlen=cumulative(qlen),
        actual_seq_kvlen=cumulative(kvlen),
    )  # fmt: skip
    want, want_max, want_sum = golden(q.float(), k.float(), v.float(), topk, 0.5, qlen, kvlen, torch.float16)
    torch.testing.assert_close(out.cpu().float(), want.half().float(), rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(smax.cpu()[..., 0], want_max, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ssum.cpu()[..., 7], want_sum, rtol=1e-5, atol=1e-5)


def test_gradients_match_autograd():
    q, k, v, topk, qlen, kvlen = inputs(1)
    leaves = [t.float().requires_grad_(True) for t in (q, k, v)]
    want, _, _ = golden(*leaves, topk, 0.5, qlen, kvlen)
    upstream = torch.randn(want.shape, generator=torch.Generator().manual_seed(2))
    want.backward(upstream)
    npu = [t.float().npu().requires_grad_(True) for t in (q, k, v)]
    out, _, _ = torch_npu.npu_nsa_select_attention(*npu, topk.npu(), 0.5, 4, BLOCK, COUNT, actual_seq_qlen=[3, 5],
                                                   actual_seq_kvlen=[12, 20])  # fmt: skip
    out.backward(upstream.npu())
    for got, leaf in zip(npu, leaves):
        torch.testing.assert_close(got.grad.cpu(), leaf.grad, rtol=1e-5, atol=1e-5)
