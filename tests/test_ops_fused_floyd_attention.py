"""npu_fused_floyd_attention against torch_npu's own golden written out (einsums over both edge sets, the mask as
-4e9 before the scale, softmax statistics repeated 8 wide) and the backward against its manual gradient formulas."""

import pytest
import torch

import torch_npu


def golden(q, k1, k2, v1, v2, scale, mask):
    s = torch.einsum("bhikc,bhijc->bhikj", q, k1) + torch.einsum("bhikc,bhjkc->bhikj", q, k2)
    if mask is not None:
        s = s + mask.bool() * (-4000000000.0)
    s = s * scale
    x_max = s.max(-1, keepdim=True)[0]
    e = torch.exp(s - x_max)
    x_sum = e.sum(-1, keepdim=True)
    p = e / x_sum
    out = torch.einsum("bhikj,bhijc->bhikc", p, v1) + torch.einsum("bhikj,bhjkc->bhikc", p, v2)
    return out, x_max, x_sum, p


def manual_grads(q, k1, k2, v1, v2, grad, out, p, scale):
    dp = torch.einsum("bhikc,bhijc->bhikj", grad, v1) + torch.einsum("bhikc,bhjkc->bhikj", grad, v2)
    ds = p * (dp - (grad * out).sum(-1, keepdim=True)) * scale
    dq = torch.einsum("bhikj,bhijc->bhikc", ds, k1) + torch.einsum("bhikj,bhjkc->bhikc", ds, k2)
    return (dq, torch.einsum("bhikj,bhikc->bhijc", ds, q), torch.einsum("bhikj,bhikc->bhijc", p, grad),
            torch.einsum("bhikj,bhikc->bhjkc", ds, q), torch.einsum("bhikj,bhikc->bhjkc", p, grad))  # fmt: skip


def inputs(seed=0, b=1, h=2, i=3, j=5, k=4, c=8):
    g = torch.Generator().manual_seed(seed)
    shapes = [(b, h, i, k, c), (b, h, i, j, c), (b, h, j, k, c), (b, h, i, j, c), (b, h, j, k, c)]
    q, k1, k2, v1, v2 = (torch.randn(s, generator=g).to(torch.bfloat16) for s in shapes)
    mask = torch.rand(b, 1, i, 1, j, generator=g) > 0.7
    return q, k1, k2, v1, v2, mask


@pytest.mark.parametrize("masked", [False, True])
def test_forward_and_backward_match_the_golden(masked):
    q, k1, k2, v1, v2, mask = inputs()
    mask = mask if masked else None
    scale = 0.35
    leaves = [t.npu().requires_grad_(True) for t in (q, k1, v1, k2, v2)]
    x_max, x_sum, out = torch_npu.npu_fused_floyd_attention(
        *leaves, atten_mask=None if mask is None else mask.npu(), scale_value=scale
    )
    f = [t.float() for t in (q, k1, k2, v1, v2)]
    want, want_max, want_sum, p = golden(*f, scale, mask)
    torch.testing.assert_close(out.cpu().float(), want.to(torch.bfloat16).float(), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(x_max.cpu(), want_max.expand(*want_max.shape[:-1], 8), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x_sum.cpu(), want_sum.expand(*want_sum.shape[:-1], 8), rtol=1e-5, atol=1e-5)
    grad = torch.randn(want.shape, generator=torch.Generator().manual_seed(9)).to(torch.bfloat16)
    out.backward(grad.npu())
    dq, dk1, dv1, dk2, dv2 = manual_grads(*f, grad.float(), want, p, scale)
    for got, expected in zip(leaves, (dq, dk1, dv1, dk2, dv2)):
        torch.testing.assert_close(got.grad.cpu().float(), expected.to(torch.bfloat16).float(), rtol=2e-2, atol=2e-2)
