"""The convolution backward operators torch_npu exposes by name (npu_conv2d_backward, npu_conv3d_backward,
npu_convolution_backward, npu_conv_transpose2d_backward, npu_conv_transpose3d_backward,
npu_convolution_transpose_backward, slow_conv_dilated2d_backward, slow_conv_transpose2d_backward): PyTorch's own
convolution backward, and _conv_depthwise2d_backward (one group per input channel). An output output_mask leaves
out is an empty tensor (torch_npu returns an undefined one)."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.convolutions import convolution_arguments
from torch_npu.ops.registration import npu_op

__all__ = []

_MASK = "bool[3] output_mask) -> (Tensor, Tensor, Tensor)"
_DIRECT = "int[] stride, int[] padding, int[] dilation, int groups, " + _MASK
_TRANSPOSED = "int[] padding, int[] output_padding, int[] stride, int[] dilation, int groups, " + _MASK


def _backward(op, ranks, x, grad, weight, stride, padding, dilation, groups, mask, transposed=False, output_padding=(0,)):  # fmt: skip
    check(len(mask) == 3, op, f"output_mask must hold 3 flags, got {len(mask)}")
    stride, padding, dilation, output_padding = convolution_arguments(
        op, ranks, x, weight, stride, padding, dilation, output_padding
    )
    bias_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    grads = torch.ops.aten.convolution_backward(
        grad, x, weight, [bias_channels], stride, padding, dilation, transposed, output_padding, groups, list(mask)
    )
    return tuple(x.new_empty(0) if g is None else g for g in grads)


def _fake(x, weight, groups, mask, transposed=False):
    bias_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    shapes = (x.shape, weight.shape, (bias_channels,))
    return tuple(x.new_empty(shape if keep else (0,)) for shape, keep in zip(shapes, mask))


def _direct(name, ranks):
    def kernel(x, grad, weight, stride, padding, dilation, groups, output_mask):
        return _backward(name, ranks, x, grad, weight, stride, padding, dilation, groups, output_mask)

    def fake(x, grad, weight, stride, padding, dilation, groups, output_mask):
        return _fake(x, weight, groups, output_mask)

    kernel.__name__ = name
    kernel.__doc__ = f"(d input, d weight, d bias) of {name.removesuffix('_backward')}, the ones output_mask selects."
    npu_op(f"{name}(Tensor input, Tensor grad_output, Tensor weight, {_DIRECT}", fake=fake)(kernel)


def _transposed(name, ranks):
    def kernel(x, grad, weight, padding, output_padding, stride, dilation, groups, output_mask):
        return _backward(name, ranks, x, grad, weight, stride, padding, dilation, groups, output_mask, True, output_padding)  # fmt: skip

    def fake(x, grad, weight, padding, output_padding, stride, dilation, groups, output_mask):
        return _fake(x, weight, groups, output_mask, transposed=True)

    kernel.__name__ = name
    kernel.__doc__ = f"(d input, d weight, d bias) of {name.removesuffix('_backward')}, the ones output_mask selects."
    npu_op(f"{name}(Tensor input, Tensor grad_output, Tensor weight, {_TRANSPOSED}", fake=fake)(kernel)


_direct("npu_conv2d_backward", (4,))
_direct("npu_conv3d_backward", (5,))
_direct("npu_convolution_backward", (4, 5))
_transposed("npu_conv_transpose2d_backward", (4,))
_transposed("npu_conv_transpose3d_backward", (5,))
_transposed("npu_convolution_transpose_backward", (4, 5))


@npu_op(
    "slow_conv_dilated2d_backward(Tensor grad_output, Tensor self, Tensor weight, int[2] kernel_size, int[2] stride, "
    "int[2] padding, int[2] dilation, bool[3] output_mask) -> (Tensor grad_input, Tensor grad_weight, Tensor grad_bias)",
    fake=lambda grad, x, weight, kernel_size, stride, padding, dilation, output_mask: _fake(x, weight, 1, output_mask),
)
def slow_conv_dilated2d_backward(grad_output, x, weight, kernel_size, stride, padding, dilation, output_mask):
    """(d self, d weight, d bias) of a dilated 2-D convolution."""
    op = "slow_conv_dilated2d_backward"
    return _backward(op, (4,), x, grad_output, weight, stride, padding, dilation, 1, output_mask)


@npu_op(
    "slow_conv_transpose2d_backward(Tensor grad_output, Tensor self, Tensor weight, int[2] kernel_size, "
    "int[2] stride, int[2] padding, int[2] output_padding, int[2] dilation, bool[3] output_mask) "
    "-> (Tensor grad_input, Tensor grad_weight, Tensor grad_bias)",
    fake=lambda grad, x, weight, kernel_size, stride, padding, output_padding, dilation, output_mask: _fake(
        x, weight, 1, output_mask, transposed=True
    ),
)
def slow_conv_transpose2d_backward(
    grad_output, x, weight, kernel_size, stride, padding, output_padding, dilation, output_mask
):
    """(d self, d weight, d bias) of a transposed 2-D convolution."""
    op = "slow_conv_transpose2d_backward"
    return _backward(op, (4,), x, grad_output, weight, stride, padding, dilation, 1, output_mask, True, output_padding)


@npu_op(
    "_conv_depthwise2d_backward(Tensor grad_output, Tensor self, Tensor weight, int[2] kernel_size, int[2] stride, "
    "int[2] padding, int[2] dilation, bool[2] output_mask) -> (Tensor grad_input, Tensor grad_weight)",
    fake=lambda grad, x, weight, kernel_size, stride, padding, dilation, output_mask: _fake(
        x, weight, x.shape[1], [*output_mask, False]
    )[:2],
)
def _conv_depthwise2d_backward(grad_output, x, weight, kernel_size, stride, padding, dilation, output_mask):
    """(d self, d weight) of a depthwise 2-D convolution (one group per input channel)."""
    op = "_conv_depthwise2d_backward"
    check(len(output_mask) == 2, op, f"output_mask must hold 2 flags, got {len(output_mask)}")
    grads = _backward(op, (4,), x, grad_output, weight, stride, padding, dilation, x.shape[1], [*output_mask, False])
    return grads[:2]
