"""npu_mhc_pre and npu_mhc_sinkhorn (mHC's input mapping and Sinkhorn normalisation) against their documented
formulas written here in float64, and their backward operators against autograd of those formulas."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

N, D = 4, 16


def pre_reference(x, phi, alpha, bias, gamma, norm_eps=1e-6, hc_eps=1e-6):
    lead = x.shape[:-2]
    flat = x.double().reshape(*lead, N * D)
    r = torch.rsqrt(flat.pow(2).mean(-1) + norm_eps)
    normed = flat * r[..., None] * gamma.double().reshape(-1)
    lin = normed @ phi.double().t()
    pre = torch.sigmoid(alpha[0] * lin[..., :N] + bias[:N]) + hc_eps
    post = 2 * torch.sigmoid(alpha[1] * lin[..., N : 2 * N] + bias[N : 2 * N])
    res = (alpha[2] * lin[..., 2 * N :] + bias[2 * N :]).reshape(*lead, N, N)
    h_in = (pre[..., None] * x.double()).sum(-2)
    return h_in, post, res


def _inputs(seed, lead=(3, 5)):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*lead, N, D, generator=g).to(torch.bfloat16)
    phi = torch.randn(N * N + 2 * N, N * D, generator=g) / 8
    alpha, bias = torch.rand(3, generator=g) + 0.5, torch.randn(N * N + 2 * N, generator=g) / 4
    gamma = torch.rand(N, D, generator=g) + 0.5
    return x, phi, alpha, bias, gamma


@pytest.mark.parametrize("lead", [(6,), (2, 3)])
def test_mhc_pre_forward(lead):
    x, phi, alpha, bias, gamma = _inputs(1, lead)
    h_in, h_post, h_res, inv_rms, h_mix, h_pre = torch_npu.npu_mhc_pre(
        x.npu(), phi.npu(), alpha.npu(), bias.npu(), gamma=gamma.npu(), out_flag=1
    )
    want = pre_reference(x, phi, alpha.double(), bias.double(), gamma)
    assert h_in.dtype == torch.bfloat16 and h_in.shape == (*lead, D)
    torch.testing.assert_close(h_in.cpu().double(), want[0], atol=2e-2, rtol=1e-2)
    torch.testing.assert_close(h_post.cpu().double(), want[1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h_res.cpu().double(), want[2], atol=1e-5, rtol=1e-5)
    assert inv_rms.shape == lead and h_mix.shape == (*lead, N * N + 2 * N) and h_pre.shape == (*lead, N)
    none = torch_npu.npu_mhc_pre(x.npu(), phi.npu(), alpha.npu(), bias.npu(), gamma=gamma.npu())
    assert all(t.numel() == 0 for t in none[3:]) and torch.equal(none[0], h_in)


def test_mhc_pre_gradients_through_its_backward():
    x, phi, alpha, bias, gamma = _inputs(2, (7,))
    ref = [t.double().requires_grad_(True) for t in (x, phi, alpha, bias, gamma)]
    outs = pre_reference(*ref)
    g = torch.Generator().manual_seed(3)
    dtypes = (torch.bfloat16, torch.float32, torch.float32)  # h_in's gradient arrives in x's dtype
    ups = [torch.randn(o.shape, generator=g).to(dt).double() for o, dt in zip(outs, dtypes)]
    torch.autograd.backward(outs, ups)
    leaves = [t.npu().requires_grad_(True) for t in (x, phi, alpha, bias, gamma)]
    got = torch_npu.npu_mhc_pre(*leaves[:4], gamma=leaves[4], out_flag=1)
    torch.autograd.backward(got[:3], [u.to(o.dtype).npu() for u, o in zip(ups, got[:3])])
    for leaf, want, tol in zip(leaves, ref, (3e-2, 1e-3, 1e-3, 1e-3, 1e-3)):
        torch.testing.assert_close(leaf.grad.cpu().double(), want.grad, atol=tol, rtol=tol)


def sinkhorn_reference(x, eps, iters):
    current = torch.softmax(x.double(), -1) + eps
    current = current / (current.sum(-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        current = current / (current.sum(-1, keepdim=True) + eps)
        current = current / (current.sum(-2, keepdim=True) + eps)
    return current


@pytest.mark.parametrize("iters", [1, 5])
def test_mhc_sinkhorn_forward_and_backward(iters):
    g = torch.Generator().manual_seed(iters)
    x = torch.randn(2, 3, N, N, generator=g)
    ref = x.double().requires_grad_(True)
    want = sinkhorn_reference(ref, 1e-6, iters)
    leaf = x.npu().requires_grad_(True)
    y, norm, sums = torch_npu.npu_mhc_sinkhorn(leaf, eps=1e-6, num_iters=iters, out_flag=1)
    torch.testing.assert_close(y.detach().cpu().double(), want.detach(), atol=1e-6, rtol=1e-5)
    assert norm.shape == (2 * iters, N, N, 2, 3) and sums.shape == (2 * iters, N, 2, 3)
    assert torch.equal(norm[-1].permute(2, 3, 0, 1), y.detach())
    up = torch.randn(y.shape, generator=g)
    want.backward(up.double())
    y.backward(up.npu())
    torch.testing.assert_close(leaf.grad.cpu().double(), ref.grad, atol=1e-5, rtol=1e-4)
    y0 = torch_npu.npu_mhc_sinkhorn(x.npu(), num_iters=iters)
    assert torch.equal(y0[0], y.detach()) and y0[1].numel() == 0


def test_errors():
    x, phi, alpha, bias, _ = _inputs(0, (2,))
    raises_operator_error(
        lambda: torch_npu.npu_mhc_pre(x.npu(), phi[:, :8].npu(), alpha.npu(), bias.npu()),
        "npu_mhc_pre: phi must be [24, 64], got (24, 8)",
    )
    raises_operator_error(
        lambda: torch_npu.npu_mhc_sinkhorn(torch.zeros(2, N, N).npu(), num_iters=0),
        "npu_mhc_sinkhorn: num_iters must be in [1, 100], got 0",
    )
    with pytest.raises(RuntimeError, match="call with out_flag=1"):
        leaf = torch.zeros(2, N, N).npu().requires_grad_(True)
        torch_npu.npu_mhc_sinkhorn(leaf)[0].sum().backward()
