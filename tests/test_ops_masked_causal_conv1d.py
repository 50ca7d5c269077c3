"""npu_masked_causal_conv1d(+_backward) against the formula written as shifted sums (zeros before the first
token, the mask on the output), and the gradients against autograd of that sum."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


def formula(x, weight, mask):
    seq, width = x.shape[0], weight.shape[0]
    y = torch.zeros_like(x)
    for k in range(width):
        shifted = torch.cat([torch.zeros_like(x[:k]), x[: seq - k]]) if k < seq else torch.zeros_like(x)
        y = y + shifted * weight[width - 1 - k]
    return y if mask is None else y * mask.t().unsqueeze(-1)


def inputs(seq=6, batch=2, hidden=8, masked=True, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(seq, batch, hidden, generator=g), torch.randn(3, hidden, generator=g)
    mask = torch.rand(batch, seq, generator=g) > 0.3 if masked else None
    return x.to(dtype), w.to(dtype), mask


@pytest.mark.parametrize("seq, masked", [(6, True), (6, False), (1, True), (2, False)])
def test_forward_and_gradients_match_the_formula(seq, masked):
    x, w, mask = inputs(seq=seq, masked=masked)
    xn, wn = x.npu().requires_grad_(True), w.npu().requires_grad_(True)
    y = torch_npu.npu_masked_causal_conv1d(xn, wn, mask=None if mask is None else mask.npu())
    xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    want = formula(xr, wr, mask)
    torch.testing.assert_close(y.detach().cpu(), want.detach(), atol=1e-5, rtol=1e-5)
    upstream = torch.randn(want.shape, generator=torch.Generator().manual_seed(1))
    want.backward(upstream)
    y.backward(upstream.npu())
    torch.testing.assert_close(xn.grad.cpu(), xr.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(wn.grad.cpu(), wr.grad, atol=1e-5, rtol=1e-5)
    gx, gw = torch_npu.npu_masked_causal_conv1d_backward(
        upstream.npu(), x.npu(), w.npu(), mask=None if mask is None else mask.npu()
    )
    assert torch.equal(gx.cpu(), xn.grad.cpu()) and torch.equal(gw.cpu(), wn.grad.cpu())


def test_half_precision_rounds_once():
    x, w, mask = inputs(dtype=torch.bfloat16)
    y = torch_npu.npu_masked_causal_conv1d(x.npu(), w.npu(), mask=mask.npu())
    assert y.dtype == torch.bfloat16
    assert torch.equal(y.cpu(), formula(x.float(), w.float(), mask).to(torch.bfloat16))


def test_refuses_bad_shapes():
    x, w, mask = inputs()
    raises_operator_error(
        lambda: torch_npu.npu_masked_causal_conv1d(x.npu(), w.npu()[:2]),
        "npu_masked_causal_conv1d: the window W must be 3, got 2",
    )
    raises_operator_error(
        lambda: torch_npu.npu_masked_causal_conv1d(x.npu(), w.npu(), mask=mask.t().npu()),
        "npu_masked_causal_conv1d: mask must be [B, S] = [2, 6], got (6, 2)",
    )
