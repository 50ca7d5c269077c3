"""Convolutions under torch_npu's own names: npu_conv2d, npu_conv3d, npu_conv_transpose2d,
npu_convolution and npu_convolution_transpose (2-D or 3-D by the input's rank)."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dtype_support import FLOATS
from torch_npu.ops.registration import npu_op

__all__ = []

_CONV = "(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, int groups) -> Tensor"
_TRANSPOSED = (
    "(Tensor input, Tensor weight, Tensor? bias, int[] padding, int[] output_padding, int[] stride, int[] dilation, "
    "int groups) -> Tensor"
)


def convolution_arguments(op, ranks, x, weight, stride, padding, dilation, output_padding=(0,)):
    """Check the input / weight ranks; (stride, padding, dilation, output_padding), each given once for every
    spatial dim or per dim, as per-dim lists."""
    check(x.dim() in ranks, op, f"input must be {' or '.join(f'{r}-D' for r in ranks)}, got {x.dim()}-D")
    check(weight.dim() == x.dim(), op, f"weight must be {x.dim()}-D like the input, got {weight.dim()}-D")
    spatial = x.dim() - 2
    return [list(v) * spatial if len(v) == 1 else list(v) for v in (stride, padding, dilation, output_padding)]


def _convolve(op, ranks, x, weight, bias, stride, padding, dilation, groups, transposed=False, output_padding=(0,)):
    stride, padding, dilation, output_padding = convolution_arguments(
        op, ranks, x, weight, stride, padding, dilation, output_padding
    )
    return torch.convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


@npu_op("npu_conv2d" + _CONV, differentiable=True, dtypes={"input": FLOATS}, api="aclnnConvolution")
def npu_conv2d(x, weight, bias, stride, padding, dilation, groups):
    return _convolve("npu_conv2d", (4,), x, weight, bias, stride, padding, dilation, groups)


@npu_op("npu_conv3d" + _CONV, differentiable=True, dtypes={"input": FLOATS}, api="aclnnConvolution")
def npu_conv3d(x, weight, bias, stride, padding, dilation, groups):
    return _convolve("npu_conv3d", (5,), x, weight, bias, stride, padding, dilation, groups)


@npu_op("npu_convolution" + _CONV, differentiable=True, dtypes={"input": FLOATS}, api="aclnnConvolution")
def npu_convolution(x, weight, bias, stride, padding, dilation, groups):
    return _convolve("npu_convolution", (4, 5), x, weight, bias, stride, padding, dilation, groups)


@npu_op("npu_conv_transpose2d" + _TRANSPOSED, differentiable=True, dtypes={"input": FLOATS}, api="aclnnConvolution")
def npu_conv_transpose2d(x, weight, bias, padding, output_padding, stride, dilation, groups):
    return _convolve(
        "npu_conv_transpose2d", (4,), x, weight, bias, stride, padding, dilation, groups, True, output_padding
    )


@npu_op(
    "npu_convolution_transpose" + _TRANSPOSED, differentiable=True, dtypes={"input": FLOATS}, api="aclnnConvolution"
)
def npu_convolution_transpose(x, weight, bias, padding, output_padding, stride, dilation, groups):
    return _convolve(
        "npu_convolution_transpose", (4, 5), x, weight, bias, stride, padding, dilation, groups, True, output_padding
    )
