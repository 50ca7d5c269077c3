"""npu_fused_attention_score_fwd / _grad (and _backward): the forward against BERT's attention written out (with the
operator's own dropout mask), and the gradients against autograd of that composition, key_transpose included."""

import pytest
import torch

import torch_npu


def composition(q, k, v, mask, scale, keep, keep_prob, key_transpose):
    key = k.transpose(-1, -2) if key_transpose else k
    probs = torch.softmax(q @ key.transpose(-1, -2) * scale + mask, -1)
    context = (probs * keep / keep_prob) @ v
    b, n, s, d = context.shape
    return context.permute(0, 2, 1, 3).reshape(b * s, n * d), probs


@pytest.mark.parametrize("keep_prob, key_transpose", [(1.0, False), (0.7, False), (0.9, True)])
def test_forward_and_gradients(keep_prob, key_transpose):
    g = torch.Generator().manual_seed(14)
    b, n, s, d = 2, 3, 5, 4
    q, v = torch.randn(b, n, s, d, generator=g), torch.randn(b, n, s, d, generator=g)
    k = torch.randn(b, n, d, s, generator=g) if key_transpose else torch.randn(b, n, s, d, generator=g)
    mask = torch.where(torch.rand(b, 1, s, s, generator=g) > 0.2, 0.0, -1e4)
    score, softmax_out, drop = torch_npu.npu_fused_attention_score_fwd(
        q.npu(), k.npu(), v.npu(), mask.npu(), 0.5, keep_prob, key_transpose=key_transpose
    )
    assert drop.dtype == torch.uint8 and drop.shape == (b * n * s * s,)  # one byte per probability, flat
    keep = drop.cpu().float().reshape(b, n, s, s)
    assert keep_prob < 1.0 or bool(keep.all())
    qr, kr, vr = (t.clone().requires_grad_(True) for t in (q, k, v))
    want, probs = composition(qr, kr, vr, mask, 0.5, keep, keep_prob, key_transpose)
    torch.testing.assert_close(score.cpu(), want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(softmax_out.cpu(), probs, atol=1e-6, rtol=1e-5)
    upstream = torch.randn(want.shape, generator=g)
    want.backward(upstream)
    for name in ("npu_fused_attention_score_grad", "npu_fused_attention_score_backward"):
        grads = getattr(torch_npu, name)(
            upstream.npu(), softmax_out, q.npu(), k.npu(), v.npu(), drop, 0.5, keep_prob, key_transpose=key_transpose
        )
        for got, tensor in zip(grads, (qr, kr, vr)):
            torch.testing.assert_close(got.cpu(), tensor.grad, atol=1e-5, rtol=1e-4)


def test_grad_refuses_a_mask_of_another_size():
    q = torch.randn(1, 2, 3, 4).npu()
    probs = torch.softmax(torch.randn(1, 2, 3, 3), -1).npu()
    mask = torch.ones(17, dtype=torch.uint8).npu()
    with pytest.raises(RuntimeError, match=r"mask must hold one byte per element of softmax_output \(18\), got 17"):
        torch_npu.npu_fused_attention_score_grad(torch.randn(3, 8).npu(), probs, q, q, q, mask, 0.5, 1.0)
