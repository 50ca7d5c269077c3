"""The spectral backward operators torch_npu exposes by name: fft_r2c_backward, fft_c2r_backward and
stft_backward — vector-Jacobian products of PyTorch's own transforms (aten._fft_r2c, aten._fft_c2r, torch.stft).
The FFTs are linear, so their products are taken at zeros of the forward input's shape."""

import torch

from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import vjp

__all__ = []

_ATEN = torch.ops.aten


def _resized(tensor, dim, size):
    shape = list(tensor.shape)
    shape[dim] = size
    return shape


@npu_op(
    "fft_r2c_backward(Tensor grad, int[] dim, int normalization, bool onesided, int last_dim_size) -> Tensor",
    fake=lambda grad, dim, normalization, onesided, last_dim_size: grad.new_empty(
        _resized(grad, dim[-1], last_dim_size), dtype=grad.real.dtype
    ),
)
def fft_r2c_backward(grad, dim, normalization, onesided, last_dim_size):
    """d input of aten._fft_r2c(input, dim, normalization, onesided), input's last transformed dim last_dim_size."""
    real = grad.new_zeros(_resized(grad, dim[-1], last_dim_size), dtype=grad.real.dtype)
    return vjp(lambda x: _ATEN._fft_r2c(x, dim, normalization, onesided), [real], [0], [grad])[0]


def _c2r_input_shape(grad, dim):
    return _resized(grad, dim[-1], grad.shape[dim[-1]] // 2 + 1)


@npu_op(
    "fft_c2r_backward(Tensor grad, int[] dim, int normalization) -> Tensor",
    fake=lambda grad, dim, normalization: grad.new_empty(_c2r_input_shape(grad, dim), dtype=grad.dtype.to_complex()),
)
def fft_c2r_backward(grad, dim, normalization):
    """d input of aten._fft_c2r(input, dim, normalization, last_dim_size=grad's last transformed dim)."""
    spectrum = grad.new_zeros(_c2r_input_shape(grad, dim), dtype=grad.dtype.to_complex())
    size = grad.shape[dim[-1]]
    return vjp(lambda x: _ATEN._fft_c2r(x, dim, normalization, size), [spectrum], [0], [grad])[0]


@npu_op(
    "stft_backward(Tensor grad_output, Tensor self, int n_fft, int? hop_length=None, int? win_length=None, "
    "Tensor? window=None, bool normalized=False, bool? onesided=None, bool? return_complex=None) -> Tensor",
    fake=lambda grad_output, x, n_fft, *args, **kwargs: torch.empty_like(x),
)
def stft_backward(grad_output, x, n_fft, hop_length=None, win_length=None, window=None, normalized=False,
                  onesided=None, return_complex=None):  # fmt: skip
    """d self of torch.stft (center=False, as aten::stft; grad_output real [..., 2] when return_complex is
    False)."""

    def forward(signal):
        return torch.stft(signal, n_fft, hop_length, win_length, window, center=False, normalized=normalized,
                          onesided=onesided, return_complex=bool(return_complex))  # fmt: skip

    return vjp(forward, [x], [0], [grad_output])[0]
