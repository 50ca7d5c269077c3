"""The Lightning Indexer's KL losses: npu_dense_lightning_indexer_softmax_lse against the indexer scores written out;
npu_dense / npu_sparse_lightning_indexer_grad_kl_loss against autograd of KL(p || softmax(I)) with p the main
attention's head-mean probabilities (its statistics computed here), in BSND and TND."""

import pytest
import torch

import torch_npu

B, S1, S2, N1, HI, D, DR = 2, 4, 6, 2, 3, 8, 4


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return dict(query=r(B, S1, N1, D), key=r(B, S2, N1, D), query_rope=r(B, S1, N1, DR), key_rope=r(B, S2, N1, DR),
                query_index=r(B, S1, HI, D), key_index=r(B, S2, 1, D), weights=r(B, S1, HI))  # fmt: skip


def causal():
    return torch.arange(S2)[None, :] <= torch.arange(S1)[:, None] + (S2 - S1)


def indexer_scores(qi, ki, w):
    return (torch.relu(torch.einsum("bshd,btd->bsht", qi, ki[:, :, 0])) * w[..., None]).sum(2)


def main_stats_and_probs(t, keep, scale):
    q = torch.cat([t["query"], t["query_rope"]], -1)
    k = torch.cat([t["key"], t["key_rope"]], -1)
    scores = torch.einsum("bsnd,btnd->bnst", q, k).mul(scale).masked_fill(~keep, float("-inf"))
    smax = scores.amax(-1)
    ssum = torch.exp(scores - smax[..., None]).sum(-1)
    p = torch.softmax(scores, -1).mean(1)  # [B, S1, S2]
    # the forward's statistics laid out [B, N2, S1, G] with N2 = N1, G = 1
    return smax[..., None], ssum[..., None], p


def kl_autograd(t, p, keep):
    leaves = {n: t[n].clone().requires_grad_(True) for n in ("query_index", "key_index", "weights")}
    scores = indexer_scores(leaves["query_index"], leaves["key_index"], leaves["weights"]).masked_fill(
        ~keep, float("-inf")
    )
    sy = torch.nan_to_num(torch.softmax(scores, -1), nan=0.0)
    # d loss / d I = sy - p: the KL's gradient with p fixed (p sums to 1 per row)
    loss = (p * (torch.log(p.clamp(min=1e-8)) - torch.log(sy.clamp(min=1e-8)))).sum()
    surrogate = (torch.log_softmax(scores, -1).nan_to_num(neginf=0.0) * -p).sum()
    surrogate.backward()
    return loss, {n: leaf.grad for n, leaf in leaves.items()}


def test_softmax_lse_is_the_indexer_softmax_statistics():
    t = inputs()
    smax, ssum = torch_npu.npu_dense_lightning_indexer_softmax_lse(
        t["query_index"].npu(), t["key_index"].npu(), t["weights"].npu()
    )
    scores = indexer_scores(t["query_index"], t["key_index"], t["weights"]).masked_fill(~causal(), float("-inf"))
    want_max = scores.amax(-1)
    torch.testing.assert_close(smax.cpu(), want_max[:, None], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        ssum.cpu(), torch.exp(scores - want_max[..., None]).sum(-1)[:, None], rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("layout", ["BSND", "TND"])
def test_dense_kl_loss_and_gradients(layout):
    t = inputs(1)
    keep = causal()
    smax, ssum, p = main_stats_and_probs(t, keep, 0.3)
    want_loss, grads = kl_autograd(t, p, keep)
    lse = torch_npu.npu_dense_lightning_indexer_softmax_lse(
        t["query_index"].npu(), t["key_index"].npu(), t["weights"].npu()
    )
    args = [t["query"], t["key"], t["query_index"], t["key_index"], t["weights"], smax, ssum, *[x.cpu() for x in lse]]
    kwargs = {"query_rope": t["query_rope"], "key_rope": t["key_rope"]}
    if layout == "TND":
        flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731
        args = [flat(a) for a in args[:5]] + [smax.permute(1, 0, 2, 3).reshape(N1, B * S1, 1), ssum.permute(1, 0, 2, 3).reshape(N1, B * S1, 1), lse[0].cpu().reshape(1, -1), lse[1].cpu().reshape(1, -1)]  # fmt: skip
        kwargs = {n: flat(v) for n, v in kwargs.items()}
        kwargs.update(layout="TND", actual_seq_qlen=[S1, 2 * S1], actual_seq_klen=[S2, 2 * S2])
    dqi, dki, dw, loss = torch_npu.npu_dense_lightning_indexer_grad_kl_loss(
        *[a.npu() for a in args], 0.3, **{n: (v.npu() if torch.is_tensor(v) else v) for n, v in kwargs.items()}
    )
    torch.testing.assert_close(loss.cpu(), want_loss.reshape(1), rtol=1e-4, atol=1e-5)
    for got, name in ((dqi, "query_index"), (dki, "key_index"), (dw, "weights")):
        torch.testing.assert_close(got.cpu().reshape(grads[name].shape), grads[name], rtol=1e-4, atol=1e-5)


def test_sparse_kl_loss_over_the_selected_keys():
    t = inputs(2)
    g = torch.Generator().manual_seed(3)
    indices = torch.stack([torch.stack([torch.randperm(S2, generator=g)[:4] for _ in range(S1)]) for _ in range(B)])
    indices[0, 0, -1] = -1
    picked = torch.zeros(B, S1, S2, dtype=torch.bool)
    for b in range(B):
        for s in range(S1):
            for j in indices[b, s].tolist():
                if j >= 0:
                    picked[b, s, j] = True
    keep = causal()[None] & picked
    smax, ssum, p = main_stats_and_probs(t, keep[:, None], 0.3)
    want_loss, grads = kl_autograd(t, p, keep)
    dqi, dki, dw, loss = torch_npu.npu_sparse_lightning_indexer_grad_kl_loss(
        t["query"].npu(), t["key"].npu(), t["query_index"].npu(), t["key_index"].npu(), t["weights"].npu(),
        indices[:, :, None].to(torch.int32).npu(), smax.npu(), ssum.npu(), 0.3, query_rope=t["query_rope"].npu(),
        key_rope=t["key_rope"].npu(),
    )  # fmt: skip
    torch.testing.assert_close(loss.cpu(), want_loss.reshape(1), rtol=1e-4, atol=1e-5)
    for got, name in ((dqi, "query_index"), (dki, "key_index"), (dw, "weights")):
        torch.testing.assert_close(got.cpu(), grads[name], rtol=1e-4, atol=1e-5)
