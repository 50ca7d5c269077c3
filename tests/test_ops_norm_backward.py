"""The named normalisation backward operators, from the forward's saved statistics, against autograd of
LayerNorm / RMSNorm written with torch on the CPU."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu


def autograd_of(forward, inputs, cotangent):
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    return torch.autograd.grad(forward(*leaves), leaves, cotangent)


def rms_norm(x, gamma, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_backward(dtype):
    g = torch.Generator().manual_seed(0)
    x, gamma, dy = torch.randn(2, 5, 16, generator=g), torch.randn(16, generator=g), torch.randn(2, 5, 16, generator=g)
    x, gamma, dy = x.to(dtype), gamma.to(dtype), dy.to(dtype)
    _, rstd = torch_npu.npu_rms_norm(x.npu(), gamma.npu())
    dx, dgamma = torch_npu.npu_rms_norm_backward(dy.npu(), x.npu(), gamma.npu(), rstd)
    want = autograd_of(rms_norm, [x.float(), gamma.float()], dy.float())
    assert dx.dtype == dtype and dgamma.dtype == torch.float32
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(dx.cpu(), want[0].to(dtype), rtol=tol, atol=tol)
    torch.testing.assert_close(dgamma.cpu(), want[1], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("div_mode", [True, False])
def test_rms_norm_backward_quant_quantises_the_input_gradient_statically(div_mode):
    g = torch.Generator().manual_seed(1)
    x, gamma, dy = torch.randn(6, 16, generator=g), torch.randn(16, generator=g), torch.randn(6, 16, generator=g)
    scale, offset = torch.rand(16, generator=g) / 20 + 0.01, torch.randint(-3, 4, (16,), generator=g, dtype=torch.int32)
    _, rstd = torch_npu.npu_rms_norm(x.npu(), gamma.npu())
    dx_q, dgamma = torch_npu._npu_rms_norm_backward_quant(
        dy.npu(), x.npu(), rstd, gamma.npu(), scale.npu(), offset_x=offset.npu(), div_mode=div_mode
    )
    want_dx, want_dgamma = autograd_of(rms_norm, [x, gamma], dy)
    scaled = (want_dx / scale if div_mode else want_dx * scale) + offset
    assert dx_q.dtype == torch.int8 and dgamma.dtype == torch.float32
    assert (dx_q.cpu().int() - torch.round(scaled).clamp(-128, 127).int()).abs().max() <= 1  # (rounding ties)
    torch.testing.assert_close(dgamma.cpu(), want_dgamma, rtol=1e-4, atol=1e-4)
    exact = torch_npu.npu_rms_norm_backward(dy.npu(), x.npu(), gamma.npu(), rstd)[0].cpu()
    expected = (exact / scale if div_mode else exact * scale) + offset
    assert torch.equal(dx_q.cpu(), torch.round(expected).clamp(-128, 127).to(torch.int8))  # npu_rms_norm_backward's dx


def test_rms_norm_backward_quant_equals_op_plugins_splice_in_float16():
    """op-plugin's reference: npu_rms_norm_backward (d x in x's dtype), then npu_quantize."""
    g = torch.Generator().manual_seed(2)
    dy, x = (torch.randn(2, 4, 64, generator=g).half().npu() for _ in range(2))
    rstd, gamma = torch.rand(2, 4, generator=g).npu() + 0.5, torch.randn(64, generator=g).half().npu()
    scale, offset = torch.tensor([0.1]).npu(), torch.tensor([0], dtype=torch.int32).npu()
    dx, dgamma = torch_npu.npu_rms_norm_backward(dy, x, gamma, rstd)
    q, q_dgamma = torch_npu._npu_rms_norm_backward_quant(dy, x, rstd, gamma, scale, offset_x=offset)
    assert torch.equal(q.cpu(), torch_npu.npu_quantize(dx, scale, offset, dtype=1, div_mode=True).cpu())
    assert torch.equal(q_dgamma.cpu(), dgamma.cpu())


def test_rms_norm_backward_quant_to_hifloat8_and_its_refusals():
    from torch_npu.utils import hifloat8

    x, gamma, dy = torch.randn(3, 8), torch.randn(8), torch.randn(3, 8)
    _, rstd = torch_npu.npu_rms_norm(x.npu(), gamma.npu())
    args = (dy.npu(), x.npu(), rstd, gamma.npu(), torch.tensor([0.5]).npu())
    codes, _ = torch_npu._npu_rms_norm_backward_quant(*args, dst_type=290)
    exact = torch_npu.npu_rms_norm_backward(dy.npu(), x.npu(), gamma.npu(), rstd)[0].cpu()
    assert codes.dtype == torch.uint8 and torch.equal(codes.cpu(), hifloat8.encode(exact / 0.5))
    for kwargs, message in (
        ({"quant_mode": "dynamic"}, "quant_mode must be 'static' (the only mode of RmsNormGradQuant), got 'dynamic'"),
        ({"dst_type": 2}, "dst_type must be 1 (torch.int8) or 290 (torch_npu.hifloat8), got 2"),
    ):
        with pytest.raises(RuntimeError) as info:
            torch_npu._npu_rms_norm_backward_quant(*args, **kwargs)
        assert str(info.value).splitlines()[0] == f"_npu_rms_norm_backward_quant: {message}"


def test_add_layer_norm_backward_with_and_without_dsum():
    g = torch.Generator().manual_seed(1)
    x1, x2 = torch.randn(4, 3, 8, generator=g), torch.randn(4, 3, 8, generator=g)
    gamma, beta = torch.randn(8, generator=g), torch.randn(8, generator=g)
    dy, dsum = torch.randn(4, 3, 8, generator=g), torch.randn(4, 3, 8, generator=g)
    _, mean, rstd, _ = torch_npu.npu_add_layer_norm(x1.npu(), x2.npu(), gamma.npu(), beta.npu())
    want = autograd_of(lambda a, b, w, c: F.layer_norm(a + b, (8,), w, c), [x1, x2, gamma, beta], dy)
    got = torch_npu.npu_add_layer_norm_backward(dy.npu(), x1.npu(), x2.npu(), rstd, mean, gamma.npu(), None)
    for have, w in zip(got, want):
        torch.testing.assert_close(have.cpu(), w, rtol=1e-4, atol=1e-5)
    with_sum = torch_npu.npu_add_layer_norm_backward(dy.npu(), x1.npu(), x2.npu(), rstd, mean, gamma.npu(), dsum.npu())
    torch.testing.assert_close(with_sum[0].cpu(), want[0] + dsum, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(with_sum[1].cpu(), want[1] + dsum, rtol=1e-4, atol=1e-5)


def test_deep_norm_backward_returns_dx_dgx_dbeta_dgamma():
    g = torch.Generator().manual_seed(2)
    x, gx = torch.randn(3, 2, 8, generator=g), torch.randn(3, 2, 8, generator=g)
    gamma, beta, dy = torch.randn(8, generator=g), torch.randn(8, generator=g), torch.randn(3, 2, 8, generator=g)
    mean, rstd, _ = torch_npu.npu_deep_norm(x.npu(), gx.npu(), beta.npu(), gamma.npu(), alpha=0.7)
    want = autograd_of(lambda a, b, c, w: F.layer_norm(0.7 * a + b, (8,), w, c, eps=1e-6), [x, gx, beta, gamma], dy)
    got = torch_npu.npu_deep_norm_backward(dy.npu(), x.npu(), gx.npu(), gamma.npu(), mean, rstd, alpha=0.7)
    for have, w in zip(got, want):
        torch.testing.assert_close(have.cpu(), w, rtol=1e-4, atol=1e-5)


def test_the_backward_operators_compile():
    g = torch.Generator().manual_seed(3)
    x, gamma, dy = torch.randn(4, 8, generator=g), torch.randn(8, generator=g), torch.randn(4, 8, generator=g)
    _, rstd = torch_npu.npu_rms_norm(x.npu(), gamma.npu())
    eager = torch_npu.npu_rms_norm_backward(dy.npu(), x.npu(), gamma.npu(), rstd)
    compiled = torch.compile(torch_npu.npu_rms_norm_backward, fullgraph=True)(dy.npu(), x.npu(), gamma.npu(), rstd)
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a.cpu(), b.cpu())
