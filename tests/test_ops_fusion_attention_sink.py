"""npu_fusion_attention's learnable sink (one score per head joining every row's softmax with a zero value, as
GPT-OSS trains it): output, softmax statistics and gradients (the sink's own included) against autograd of the
softmax over [scores, sink] written here; the fused backward path, the recomputing one (pse, TND) and v2."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

B, N, S, D, SCALE = 2, 3, 5, 8, 0.4


def reference(q, k, v, sink, pse=None):
    scores = SCALE * (q @ k.transpose(-1, -2) + (0 if pse is None else pse))
    column = sink.view(1, N, 1, 1).expand(*scores.shape[:-1], 1)
    probs = torch.softmax(torch.cat([scores, column], -1), -1)[..., :-1]
    return probs @ v, torch.logsumexp(torch.cat([scores, column], -1), -1)


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, N, S, D, generator=g) for _ in range(3)] + [torch.randn(N, generator=g)]


@pytest.mark.parametrize("with_pse", [False, True])
def test_bnsd_forward_statistics_and_gradients(with_pse):
    q, k, v, sink = _inputs(1)
    pse = torch.randn(B, N, S, S) if with_pse else None
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v, sink)]
    want, lse = reference(*leaves, pse=pse)
    dy = torch.randn_like(want)
    want.backward(dy)
    npu_leaves = [t.npu().requires_grad_(True) for t in (q, k, v, sink)]
    out, smax, ssum, *_ = torch_npu.npu_fusion_attention(
        *npu_leaves[:3], N, "BNSD", pse=None if pse is None else pse.npu(), scale=SCALE, sink=npu_leaves[3]
    )
    torch.testing.assert_close(out.detach().cpu(), want.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close((smax[..., 0] + torch.log(ssum[..., 0])).cpu(), lse.detach(), atol=1e-5, rtol=1e-5)
    out.backward(dy.npu())
    for got, ref in zip(npu_leaves, leaves):
        torch.testing.assert_close(got.grad.cpu(), ref.grad, atol=1e-4, rtol=1e-4)


def test_tnd_and_v2_carry_the_sink():
    q, k, v, sink = _inputs(2)
    want, _ = reference(q, k, v, sink)
    tnd = lambda t: t.permute(0, 2, 1, 3).reshape(B * S, N, D)  # noqa: E731
    out = torch_npu.npu_fusion_attention(
        tnd(q).npu(), tnd(k).npu(), tnd(v).npu(), N, "TND", scale=SCALE, sink=sink.npu(),
        actual_seq_qlen=[S, 2 * S], actual_seq_kvlen=[S, 2 * S],
    )[0]  # fmt: skip
    torch.testing.assert_close(out.cpu(), tnd(want), atol=1e-5, rtol=1e-5)
    leaf = sink.npu().requires_grad_(True)
    out2 = torch_npu.npu_fusion_attention_v2(q.npu(), k.npu(), v.npu(), N, "BNSD", scale=SCALE, sink=leaf)[0]
    torch.testing.assert_close(out2.detach().cpu(), want, atol=1e-5, rtol=1e-5)
    out2.sum().backward()
    ref_sink = sink.clone().requires_grad_(True)
    reference(q, k, v, ref_sink)[0].sum().backward()
    torch.testing.assert_close(leaf.grad.cpu(), ref_sink.grad, atol=1e-4, rtol=1e-4)


def test_sink_size_error():
    q, k, v, _ = _inputs(3)
    raises_operator_error(
        lambda: torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), N, "BNSD", sink=torch.zeros(2).npu()),
        "npu_fusion_attention: sink must hold one value per query head (3), got (2,)",
    )


def test_v3_takes_tensor_lengths_and_returns_tensor_seeds():
    q, k, v, sink = _inputs(4)
    tnd = lambda t: t.permute(0, 2, 1, 3).reshape(B * S, N, D)  # noqa: E731
    lengths = torch.tensor([S, 2 * S], dtype=torch.int64).npu()
    leaves = [tnd(t).npu().requires_grad_(True) for t in (q, k, v)]
    out, smax, ssum, _, seed, offset = torch_npu.npu_fusion_attention_v3(
        *leaves, N, "TND", scale=SCALE, actual_seq_qlen=lengths, actual_seq_kvlen=lengths, sink=sink.npu()
    )
    assert seed.dtype == torch.int64 and seed.shape == (1,) and offset.shape == (1,)
    v1 = torch_npu.npu_fusion_attention(
        *[t.detach() for t in leaves], N, "TND", scale=SCALE, actual_seq_qlen=[S, 2 * S], actual_seq_kvlen=[S, 2 * S],
        sink=sink.npu(),
    )  # fmt: skip
    assert torch.equal(out.detach(), v1[0]) and torch.equal(smax, v1[1]) and torch.equal(ssum, v1[2])
    dy = torch.randn_like(out)
    out.backward(dy)
    cpu = [tnd(t).clone().requires_grad_(True) for t in (q, k, v)]
    bnsd = lambda t: t.reshape(B, S, N, D).permute(0, 2, 1, 3)  # noqa: E731
    want = tnd(reference(*[bnsd(t) for t in cpu], sink)[0])
    want.backward(dy.cpu())
    for got, ref in zip(leaves, cpu):
        torch.testing.assert_close(got.grad.cpu(), ref.grad, atol=1e-4, rtol=1e-4)
    grads = torch_npu.npu_fusion_attention_grad_v3(
        *[t.detach() for t in leaves], dy, N, "TND", softmax_max=smax, softmax_sum=ssum, attention_in=out.detach(),
        scale_value=SCALE, seed=seed, offset=offset, actual_seq_qlen=lengths, actual_seq_kvlen=lengths, sink=sink.npu(),
    )  # fmt: skip
    assert all(torch.equal(g, t.grad) for g, t in zip(grads[:3], leaves))


def test_grad_v2_splits_the_rope_gradients():
    g = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(B, N, S, D, generator=g) for _ in range(3))
    qr, kr = torch.randn(B, N, S, 4, generator=g), torch.randn(B, N, S, 4, generator=g)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v, qr, kr)]
    scores = SCALE * torch.cat(leaves[:1] + leaves[3:4], -1) @ torch.cat([leaves[1], leaves[4]], -1).transpose(-1, -2)
    want = torch.softmax(scores, -1) @ leaves[2]
    dy = torch.randn_like(want)
    want.backward(dy)
    out, smax, ssum, *_ = torch_npu.npu_fusion_attention_v2(
        q.npu(), k.npu(), v.npu(), N, "BNSD", query_rope=qr.npu(), key_rope=kr.npu(), scale=SCALE
    )
    grads = torch_npu.npu_fusion_attention_grad_v2(
        q.npu(), k.npu(), v.npu(), dy.npu(), N, "BNSD", softmax_max=smax, softmax_sum=ssum, attention_in=out,
        query_rope=qr.npu(), key_rope=kr.npu(), scale_value=SCALE,
    )  # fmt: skip
    assert len(grads) == 7 and grads[3].numel() == 0 and grads[6].numel() == 0
    for got, ref in zip([grads[0], grads[1], grads[2], grads[4], grads[5]], leaves):
        torch.testing.assert_close(got.cpu(), ref.grad, atol=1e-4, rtol=1e-4)
