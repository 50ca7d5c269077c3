"""npu_deformable_conv2d (+ npu_deformable_conv2dbk) against torchvision's deform_conv2d (its CPU kernel) with
the offsets rearranged from torchvision's (y, x) pairs into torch_npu's [x..., y..., mask...] layout, as mmcv's
Ascend path does; gradients of every input through the backward operator."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

ops = pytest.importorskip("torchvision.ops", reason="torchvision is a test dependency")


def npu_offset(offset_yx, mask):
    """torchvision's [N, 2 * dg * K (y, x pairs), H, W] + mask -> torch_npu's [x..., y..., mask...]."""
    return torch.cat([offset_yx[:, 1::2], offset_yx[:, 0::2], mask], 1)


@pytest.mark.parametrize("stride, pad, dil, groups, dg", [(1, 1, 1, 1, 1), (2, 2, 2, 2, 2)])
def test_matches_torchvision_with_gradients(stride, pad, dil, groups, dg):
    g = torch.Generator().manual_seed(stride)
    n, c, h, w, cout, k = 2, 4, 9, 8, 6, 3
    x = torch.randn(n, c, h, w, generator=g)
    weight = torch.randn(cout, c // groups, k, k, generator=g)
    bias = torch.randn(cout, generator=g)
    ho = (h + 2 * pad - dil * (k - 1) - 1) // stride + 1
    wo = (w + 2 * pad - dil * (k - 1) - 1) // stride + 1
    offset = torch.randn(n, 2 * dg * k * k, ho, wo, generator=g) * 1.5
    mask = torch.rand(n, dg * k * k, ho, wo, generator=g)
    cpu = [t.clone().requires_grad_(True) for t in (x, weight, offset, mask, bias)]
    want = ops.deform_conv2d(cpu[0], cpu[2], cpu[1], cpu[4], stride=stride, padding=pad, dilation=dil, mask=cpu[3])
    upstream = torch.randn(want.shape, generator=g)
    want.backward(upstream)
    leaves = [t.npu().requires_grad_(True) for t in (x, weight, npu_offset(offset, mask), bias)]
    out, offset_out = torch_npu.npu_deformable_conv2d(
        leaves[0], leaves[1], leaves[2], leaves[3], kernel_size=[k, k], stride=[1, 1, stride, stride],
        padding=[pad] * 4, dilation=[1, 1, dil, dil], groups=groups, deformable_groups=dg,
    )  # fmt: skip
    assert offset_out.shape == (n, c, ho * k, wo * k)
    torch.testing.assert_close(out.detach().cpu(), want.detach(), atol=1e-4, rtol=1e-4)
    out.backward(upstream.npu())
    torch.testing.assert_close(leaves[0].grad.cpu(), cpu[0].grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(leaves[1].grad.cpu(), cpu[1].grad, atol=1e-3, rtol=1e-4)
    want_offset_grad = npu_offset(cpu[2].grad, cpu[3].grad)
    torch.testing.assert_close(leaves[2].grad.cpu(), want_offset_grad, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(leaves[3].grad.cpu(), cpu[4].grad, atol=1e-4, rtol=1e-4)


def test_offset_channel_error():
    x, weight = torch.randn(1, 2, 5, 5).npu(), torch.randn(2, 2, 3, 3).npu()
    raises_operator_error(
        lambda: torch_npu.npu_deformable_conv2d(
            x, weight, torch.zeros(1, 18, 5, 5).npu(), None, [3, 3], [1, 1, 1, 1], [1, 1, 1, 1]
        ),  # fmt: skip
        "npu_deformable_conv2d: offset must have 3 * deformable_groups * kh * kw = 27 channels, got 18",
    )
