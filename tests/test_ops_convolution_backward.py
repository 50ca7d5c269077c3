"""The named convolution backward operators against autograd of torch's convolutions on the CPU."""

import pytest
import torch
import torch.nn.functional as F
from op_check import check_op

import torch_npu

torch.manual_seed(0)


def autograd_of(forward, inputs, cotangent, mask):
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    grads = torch.autograd.grad(forward(*leaves), leaves, cotangent)
    return tuple(g if keep else g.new_empty(0) for g, keep in zip(grads, mask))


@pytest.mark.parametrize(
    ("name", "rank", "groups"),
    [("npu_conv2d_backward", 2, 1), ("npu_conv3d_backward", 3, 1), ("npu_convolution_backward", 2, 2)],
)
def test_direct_convolution_backward(name, rank, groups):
    x = torch.randn(2, 4, *([7] * rank))
    w = torch.randn(6, 4 // groups, *([3] * rank))
    b = torch.randn(6)
    conv = (F.conv2d, F.conv3d)[rank - 2]
    forward = lambda x, w, b: conv(x, w, b, stride=2, padding=1, dilation=1, groups=groups)  # noqa: E731
    dy = torch.randn(forward(x, w, b).shape)
    mask = [True, True, True]
    check_op(
        lambda x, dy, w: getattr(torch_npu, name)(x, dy, w, [2], [1], [1], groups, mask),
        (x, dy, w),
        lambda x, dy, w: autograd_of(forward, [x, w, b], dy, mask),
        atol=1e-4,
        rtol=1e-4,
    )


@pytest.mark.parametrize(("name", "rank"), [("npu_conv_transpose2d_backward", 2), ("npu_conv_transpose3d_backward", 3),
                                            ("npu_convolution_transpose_backward", 2)])  # fmt: skip
def test_transposed_convolution_backward_with_a_mask(name, rank):
    x = torch.randn(1, 4, *([5] * rank))
    w, b = torch.randn(4, 3, *([3] * rank)), torch.randn(3)
    conv = (F.conv_transpose2d, F.conv_transpose3d)[rank - 2]
    forward = lambda x, w, b: conv(x, w, b, stride=2, padding=1, output_padding=1)  # noqa: E731
    dy = torch.randn(forward(x, w, b).shape)
    mask = [True, False, True]
    check_op(
        lambda x, dy, w: getattr(torch_npu, name)(x, dy, w, [1], [1], [2], [1], 1, mask),
        (x, dy, w),
        lambda x, dy, w: autograd_of(forward, [x, w, b], dy, mask),
        atol=1e-4,
        rtol=1e-4,
    )


def test_slow_conv_dilated2d_and_transpose2d_backward():
    x, w, b = torch.randn(1, 2, 9, 9), torch.randn(3, 2, 3, 3), torch.randn(3)
    dilated = lambda x, w, b: F.conv2d(x, w, b, padding=2, dilation=2)  # noqa: E731
    dy = torch.randn(dilated(x, w, b).shape)
    check_op(
        lambda dy, x, w: torch_npu.slow_conv_dilated2d_backward(dy, x, w, [3, 3], [1, 1], [2, 2], [2, 2], [True] * 3),
        (dy, x, w),
        lambda dy, x, w: autograd_of(dilated, [x, w, b], dy, [True] * 3),
        atol=1e-4,
        rtol=1e-4,
    )
    wt = torch.randn(2, 3, 3, 3)
    transposed = lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1)  # noqa: E731
    dy = torch.randn(transposed(x, wt, b).shape)
    mask = [False, True, True]
    check_op(
        lambda dy, x, w: torch_npu.slow_conv_transpose2d_backward(
            dy, x, w, [3, 3], [2, 2], [1, 1], [1, 1], [1, 1], mask
        ),  # noqa: E501
        (dy, x, wt),
        lambda dy, x, w: autograd_of(transposed, [x, w, b], dy, mask),
        atol=1e-4,
        rtol=1e-4,
    )


def test_a_wrong_rank_is_refused():
    x = torch.randn(1, 2, 5, 5, 5, device="npu")
    with pytest.raises(RuntimeError, match="input must be 4-D, got 5-D"):
        torch_npu.npu_conv2d_backward(x, x, x, [1], [0], [1], 1, [True, True, True])


def test_depthwise_conv2d_backward():
    x, w = torch.randn(2, 3, 7, 7), torch.randn(3, 1, 3, 3)
    forward = lambda x, w: F.conv2d(x, w, stride=2, padding=1, dilation=1, groups=3)  # noqa: E731
    dy = torch.randn(forward(x, w).shape)

    def reference(dy, x, w):
        leaves = [t.clone().requires_grad_(True) for t in (x, w)]
        return torch.autograd.grad(forward(*leaves), leaves, dy)

    check_op(
        lambda dy, x, w: torch.ops.npu._conv_depthwise2d_backward(
            dy, x, w, [3, 3], [2, 2], [1, 1], [1, 1], [True, True]
        ),
        (dy, x, w),
        reference,
        atol=1e-4,
        rtol=1e-4,
    )
