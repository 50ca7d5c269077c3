"""The named activation / softmax / dropout backward operators against autograd of independent CPU compositions
(and, for the dropout ones, against the forward's own mask)."""

import pytest
import torch
import torch.nn.functional as F
from op_check import check_op

import torch_npu

torch.manual_seed(0)


def autograd_of(forward, inputs, cotangent):
    """Gradients of forward(*inputs) weighted by cotangent, w.r.t. every input."""
    leaves = [x.detach().requires_grad_(True) for x in inputs]
    return torch.autograd.grad(forward(*leaves), leaves, cotangent)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward(approximate):
    x, dy = torch.randn(4, 9), torch.randn(4, 9)
    check_op(
        lambda dy, x: torch_npu.npu_gelu_backward(dy, x, approximate=approximate),
        (dy, x),
        lambda dy, x: autograd_of(lambda t: F.gelu(t, approximate=approximate), [x], dy)[0],
    )


def test_fast_gelu_backward():
    x, dy = torch.randn(5, 7), torch.randn(5, 7)
    check_op(
        torch_npu.npu_fast_gelu_backward,
        (dy, x),
        lambda dy, x: autograd_of(lambda t: t * torch.sigmoid(1.702 * t), [x], dy)[0],
    )


def test_silu_and_mish_backward():
    x, dy = torch.randn(3, 8), torch.randn(3, 8)
    check_op(
        torch_npu.npu_silu_backward,
        (dy, x, F.silu(x)),
        lambda dy, x, y: autograd_of(lambda t: t * torch.sigmoid(t), [x], dy)[0],
    )
    check_op(
        torch_npu.npu_mish_backward,
        (dy, x),
        lambda dy, x: autograd_of(lambda t: t * torch.tanh(F.softplus(t)), [x], dy)[0],
    )


@pytest.mark.parametrize("dim", [-1, 0])
def test_swiglu_backward(dim):
    x = torch.randn(6, 10)
    dy = torch.randn(3, 10) if dim == 0 else torch.randn(6, 5)

    def ref(dy, x):
        def swiglu(t):
            a, b = t.chunk(2, dim)
            return a * torch.sigmoid(a) * b

        return autograd_of(swiglu, [x], dy)[0]

    check_op(lambda dy, x: torch_npu.npu_swiglu_backward(dy, x, dim), (dy, x), ref)


def test_rotary_mul_backward_sums_the_broadcast_tables():
    x, dy = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 4, 8)
    r1, r2 = torch.randn(1, 3, 1, 8), torch.randn(1, 3, 1, 8)

    def rope(x, r1, r2):
        a, b = x.chunk(2, -1)
        return x * r1 + torch.cat((-b, a), -1) * r2

    check_op(
        torch_npu.npu_rotary_mul_backward,
        (dy, x, r1, r2),
        lambda dy, x, r1, r2: autograd_of(rope, [x, r1, r2], dy),
    )


def test_scaled_masked_softmax_backward_from_the_saved_output():
    x, dy = torch.randn(2, 2, 4, 6), torch.randn(2, 2, 4, 6)
    mask = torch.rand(2, 2, 4, 6) > 0.7

    def forward(t):
        return torch.softmax((t * 0.5).masked_fill(mask, -10000.0), -1)

    y = forward(x)
    check_op(
        lambda dy, y, m: torch_npu.npu_scaled_masked_softmax_backward(dy, y, m, 0.5, False),
        (dy, y, mask),
        lambda dy, y, m: autograd_of(forward, [x], dy)[0],
    )


def test_dropout_backward_keeps_what_the_forward_kept():
    x = torch.randn(300, device="npu")
    out, mask = torch_npu._npu_dropout(x, 0.25)
    dy = torch.randn(300, device="npu")
    got = torch_npu.npu_dropout_backward(dy, mask, 0.25)
    kept = out != 0
    assert 0 < int(kept.sum()) < 300
    torch.testing.assert_close(got.cpu(), torch.where(kept, dy / 0.75, 0.0).cpu())


def test_dropout_with_add_softmax_backward_matches_the_forward_autograd():
    a, b = torch.randn(3, 16, device="npu"), torch.randn(3, 16, device="npu")
    a.requires_grad_(True)
    b.requires_grad_(True)
    mask, softmax_out, dropped = torch_npu.npu_dropout_with_add_softmax(a, b, 0.5, 0.3, -1)
    dy = torch.randn(3, 16, device="npu")
    want = torch.autograd.grad(dropped, [a, b], dy)
    got = torch_npu.npu_dropout_with_add_softmax_backward(dy, mask, softmax_out.detach(), 0.5, 0.3, -1)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w.cpu())

    s = torch.softmax(b.detach().cpu() + 0.5 * a.detach().cpu(), -1)
    keep = mask.cpu().float() / 0.7
    d_y = s * (dy.cpu() * keep - (dy.cpu() * keep * s).sum(-1, keepdim=True))
    torch.testing.assert_close(got[1].cpu(), d_y)
    torch.testing.assert_close(got[0].cpu(), 0.5 * d_y)
