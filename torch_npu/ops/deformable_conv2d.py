"""npu_deformable_conv2d / npu_deformable_conv2dbk: (modulated) deformable convolution, DCNv2 (DeformableOffsets
followed by a convolution, as the card runs it).

input [N, C, H, W], weight [C_out, C / groups, kh, kw], offset [N, 3 * dg * kh * kw, H_out, W_out] holding the x
offsets of every (deformable group, kernel point), then the y offsets, then the masks (torch_npu's layout:
mmcv and torchvision keep (y, x) pairs and a separate mask). stride / dilation are [1, 1, sh, sw] (NCHW order),
padding [top, bottom, left, right]. Each kernel point (i, j) of output pixel (ho, wo) samples the input
bilinearly at (ho * sh - top + i * dh + dy, wo * sw - left + j * dw + dx), zero outside the image, times its
mask (modulated; 1 otherwise). offset_out holds those samples [N, C, H_out * kh, W_out * kw] (the deformed
image); the output is its convolution with weight at stride (kh, kw), plus bias.

The backward returns (grad_input, grad_weight, grad_offset, grad_bias); npu_deformable_conv2d is differentiable
through it.
"""

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import recording_gradients

__all__ = []

_OP = "npu_deformable_conv2d"
_ARGS = (
    "int[2] kernel_size, int[] stride, int[] padding, int[4] dilation=[1,1,1,1], int groups=1, "
    "int deformable_groups=1, bool modulated=True"
)


def _geometry(x, offset, kernel_size, stride, padding, dilation, deformable_groups, op):
    check(x.dim() == 4 and offset.dim() == 4, op, f"self and offset must be 4-D, got {tuple(x.shape)} and {tuple(offset.shape)}")  # fmt: skip
    check(len(stride) == 4 and len(padding) == 4 and len(dilation) == 4, op, "stride, padding and dilation must hold 4 values")  # fmt: skip
    kh, kw = kernel_size
    points = deformable_groups * kh * kw
    check(offset.shape[1] == 3 * points, op, f"offset must have 3 * deformable_groups * kh * kw = {3 * points} channels, got {offset.shape[1]}")  # fmt: skip
    check(x.shape[1] % deformable_groups == 0, op, f"in_channels {x.shape[1]} must divide into {deformable_groups} deformable groups")  # fmt: skip
    return kh, kw, stride[2], stride[3], padding[0], padding[2], dilation[2], dilation[3]


def _deformed(x, offset, kernel_size, stride, padding, dilation, deformable_groups, modulated, op):
    """offset_out [N, C, H_out * kh, W_out * kw]: the bilinear samples (times the masks)."""
    kh, kw, sh, sw, top, left, dh, dw = _geometry(x, offset, kernel_size, stride, padding, dilation, deformable_groups, op)  # fmt: skip
    n, c, h, w = x.shape
    ho, wo, dg = offset.shape[2], offset.shape[3], deformable_groups
    dx, dy, mask = offset.float().reshape(n, 3, dg, kh, kw, ho, wo).unbind(1)
    base_y = (torch.arange(ho, device=x.device) * sh - top).view(1, 1, 1, 1, ho, 1) + (torch.arange(kh, device=x.device) * dh).view(1, 1, kh, 1, 1, 1)  # fmt: skip
    base_x = (torch.arange(wo, device=x.device) * sw - left).view(1, 1, 1, 1, 1, wo) + (torch.arange(kw, device=x.device) * dw).view(1, 1, 1, kw, 1, 1)  # fmt: skip
    ys, xs = base_y + dy, base_x + dx  # [n, dg, kh, kw, ho, wo]
    grid = torch.stack([2 * xs / max(w - 1, 1) - 1, 2 * ys / max(h - 1, 1) - 1], -1)
    grid = grid.permute(0, 1, 4, 2, 5, 3, 6).reshape(n * dg, ho * kh, wo * kw, 2)  # rows (ho, i), columns (wo, j)
    images = x.float().reshape(n * dg, c // dg, h, w)
    samples = F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=True)
    if modulated:
        weights = mask.permute(0, 1, 4, 2, 5, 3).reshape(n * dg, 1, ho * kh, wo * kw)
        samples = samples * weights
    return samples.reshape(n, c, ho * kh, wo * kw)


def _forward(x, weight, offset, bias, kernel_size, stride, padding, dilation, groups, deformable_groups, modulated,
             op):  # fmt: skip
    check(weight.dim() == 4 and tuple(weight.shape[2:]) == tuple(kernel_size), op, f"weight must be [C_out, C / groups, {kernel_size[0]}, {kernel_size[1]}], got {tuple(weight.shape)}")  # fmt: skip
    deformed = _deformed(x, offset, kernel_size, stride, padding, dilation, deformable_groups, modulated, op)
    out = F.conv2d(deformed, weight.float(), None if bias is None else bias.float(), stride=tuple(kernel_size), groups=groups)  # fmt: skip
    return out.to(x.dtype), deformed.to(x.dtype)


def _setup(ctx, inputs, output):
    x, weight, offset, bias, *options = inputs
    ctx.options, ctx.has_bias = options, bias is not None
    ctx.save_for_backward(x, weight, offset, output[1])


def _backward(ctx, grad_out, _grad_offset_out):
    x, weight, offset, offset_out = ctx.saved_tensors
    gx, gw, goff, gb = torch.ops.npu.npu_deformable_conv2dbk(x, grad_out, offset_out, weight, offset, *ctx.options)
    return gx, gw, goff, gb if ctx.has_bias else None, None, None, None, None, None, None, None


def _fake(x, weight, offset, bias, kernel_size, *args, **kwargs):
    n, c, ho, wo = x.shape[0], x.shape[1], offset.shape[2], offset.shape[3]
    return x.new_empty(n, weight.shape[0], ho, wo), x.new_empty(n, c, ho * kernel_size[0], wo * kernel_size[1])


@npu_op(
    f"npu_deformable_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor? bias, {_ARGS}) -> (Tensor, Tensor)",
    fake=_fake,
    backward=_backward,
    setup_context=_setup,
)
def npu_deformable_conv2d(x, weight, offset, bias, kernel_size, stride, padding, dilation=(1, 1, 1, 1), groups=1,
                          deformable_groups=1, modulated=True):  # fmt: skip
    """(output [N, C_out, H_out, W_out], offset_out [N, C, H_out * kh, W_out * kw])."""
    return _forward(x, weight, offset, bias, kernel_size, stride, padding, dilation, groups, deformable_groups,
                    modulated, _OP)  # fmt: skip


@npu_op(
    "npu_deformable_conv2dbk(Tensor input, Tensor grad_output, Tensor offset_out, Tensor weight, Tensor offset, "
    f"{_ARGS}) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=lambda x, grad, offset_out, weight, offset, *a, **k: (
        torch.empty_like(x),
        torch.empty_like(weight),
        torch.empty_like(offset),
        x.new_empty(weight.shape[0]),
    ),
)
def npu_deformable_conv2dbk(x, grad_output, offset_out, weight, offset, kernel_size, stride, padding,
                            dilation=(1, 1, 1, 1), groups=1, deformable_groups=1, modulated=True):  # fmt: skip
    """(grad_input, grad_weight, grad_offset, grad_bias)."""
    op = "npu_deformable_conv2dbk"
    leaves = [t.detach().float().requires_grad_(True) for t in (x, weight, offset)]
    with recording_gradients():
        deformed = _deformed(leaves[0], leaves[2], kernel_size, stride, padding, dilation, deformable_groups, modulated, op)  # fmt: skip
        out = F.conv2d(deformed, leaves[1], stride=tuple(kernel_size), groups=groups)
        gx, gw, goff = torch.autograd.grad(out, leaves, grad_output.float())
    grad_bias = grad_output.float().sum((0, 2, 3))
    return gx.to(x.dtype), gw.to(weight.dtype), goff.to(offset.dtype), grad_bias.to(weight.dtype)
