"""fft_r2c_backward, fft_c2r_backward, stft_backward and matmul_double_backward against PyTorch's autograd of the
same transforms / of matmul's backward on the CPU."""

import pytest
import torch
from op_check import check_op

import torch_npu


def autograd_of(forward, x, cotangent):
    leaf = x.detach().clone().requires_grad_(True)
    return torch.autograd.grad(forward(leaf), leaf, cotangent)[0]


@pytest.mark.parametrize("onesided", [True, False])
@pytest.mark.parametrize("normalization", [0, 1, 2])
def test_fft_r2c_backward(onesided, normalization):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 8, 6, generator=g)
    dim = [1, 2]
    forward = lambda t: torch.ops.aten._fft_r2c(t, dim, normalization, onesided)  # noqa: E731
    spectrum = forward(x)
    grad = torch.complex(torch.randn(spectrum.shape, generator=g), torch.randn(spectrum.shape, generator=g))
    check_op(
        lambda grad: torch_npu.fft_r2c_backward(grad, dim, normalization, onesided, 6),
        (grad,),
        lambda grad: autograd_of(forward, x, grad),
    )


@pytest.mark.parametrize("size", [8, 9])
def test_fft_c2r_backward(size):
    g = torch.Generator().manual_seed(1)
    spectrum = torch.complex(torch.randn(4, size // 2 + 1, generator=g), torch.randn(4, size // 2 + 1, generator=g))
    forward = lambda t: torch.ops.aten._fft_c2r(t, [1], 2, size)  # noqa: E731
    grad = torch.randn(4, size, generator=g)
    check_op(
        lambda grad: torch_npu.fft_c2r_backward(grad, [1], 2),
        (grad,),
        lambda grad: autograd_of(forward, spectrum, grad),
    )


@pytest.mark.parametrize("return_complex", [True, False])
def test_stft_backward(return_complex):
    g = torch.Generator().manual_seed(2)
    signal, window = torch.randn(2, 64, generator=g), torch.hann_window(16)

    def forward(t):
        return torch.stft(
            t, 16, 4, 16, window, center=False, normalized=True, onesided=True, return_complex=return_complex
        )  # noqa: E501

    shape = forward(signal).shape
    grad = (
        torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g))
        if return_complex
        else torch.randn(shape, generator=g)
    )  # noqa: E501
    check_op(
        lambda grad, x, w: torch_npu.stft_backward(grad, x, 16, 4, 16, w, True, True, return_complex),
        (grad, signal, window),
        lambda grad, x, w: autograd_of(forward, x, grad),
        atol=1e-4,
        rtol=1e-4,
    )


@pytest.mark.parametrize(("a_shape", "b_shape"), [((3, 4), (4, 5)), ((2, 3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_double_backward(a_shape, b_shape):
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(a_shape, generator=g), torch.randn(b_shape, generator=g)
    grad_out = torch.randn(torch.matmul(a, b).shape, generator=g)
    gg_a, gg_b = torch.randn(a_shape, generator=g), torch.randn(b_shape, generator=g)

    def reference(gg_a, gg_b, grad_out, a, b):
        leaves = [t.clone().requires_grad_(True) for t in (grad_out, a, b)]
        first = torch.autograd.grad(torch.matmul(leaves[1], leaves[2]), leaves[1:], leaves[0], create_graph=True)
        return torch.autograd.grad(first, leaves, [gg_a, gg_b])

    check_op(
        lambda *t: torch_npu.matmul_double_backward(*t, [True, True, True]),
        (gg_a, gg_b, grad_out, a, b),
        reference,
        atol=1e-5,
        rtol=1e-5,
    )
    masked = torch_npu.matmul_double_backward(None, gg_b.npu(), grad_out.npu(), a.npu(), b.npu(), [True, False, True])
    leaves = [t.clone().requires_grad_(True) for t in (grad_out, a, b)]
    (first,) = torch.autograd.grad(torch.matmul(leaves[1], leaves[2]), [leaves[2]], leaves[0], create_graph=True)
    want = torch.autograd.grad(first, [leaves[0], leaves[2]], gg_b, allow_unused=True)
    want = [torch.zeros_like(leaves[2]) if w is None else w for w in want]
    assert masked[1].numel() == 0
    torch.testing.assert_close(masked[0].cpu(), want[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(masked[2].cpu(), want[1], atol=1e-5, rtol=1e-5)
