"""ModulatedDeformConv (deformable convolution v2, as mmcv's ModulatedDeformConv2dPack).

Each kernel tap k of output pixel p reads the input at p * stride - padding + k * dilation +
offset (dy, dx) by bilinear interpolation (zero outside the image), scaled by a mask in [0, 1].
Offsets are laid out as mmcv lays them: per deformable group, (dy, dx) pairs in kernel order. With
pack=True the module predicts offsets and masks from its input with a zero-initialised convolution
(so a fresh module equals a plain convolution).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.utils import _pair

__all__ = ["ModulatedDeformConv", "ModulatedDeformConv2dFunction", "DCNv2"]


def _deform_columns(x, offset, mask, kernel, stride, padding, dilation, deformable_groups):
    """[B, C * kh * kw, Ho * Wo] sampled columns (channel-major, then kernel tap)."""
    batch, channels, height, width = x.shape
    kh, kw = kernel
    out_h, out_w = offset.shape[-2:]
    taps = kh * kw
    base_y = (torch.arange(out_h, device=x.device, dtype=x.dtype) * stride[0] - padding[0])[:, None]
    base_x = (torch.arange(out_w, device=x.device, dtype=x.dtype) * stride[1] - padding[1])[None, :]
    offset = offset.view(batch, deformable_groups, taps, 2, out_h, out_w)
    mask = mask.view(batch, deformable_groups, taps, out_h, out_w)
    per_group = channels // deformable_groups
    columns = []
    for g in range(deformable_groups):
        xg = x[:, g * per_group : (g + 1) * per_group]
        samples = []
        for t in range(taps):
            i, j = divmod(t, kw)
            y = base_y + i * dilation[0] + offset[:, g, t, 0]
            xx = base_x + j * dilation[1] + offset[:, g, t, 1]
            grid = torch.stack([2 * xx / max(width - 1, 1) - 1, 2 * y / max(height - 1, 1) - 1], dim=-1)
            sampled = F.grid_sample(xg, grid, mode="bilinear", padding_mode="zeros", align_corners=True)
            samples.append(sampled * mask[:, g, t].unsqueeze(1))
        columns.append(torch.stack(samples, dim=2))  # [B, per_group, taps, Ho, Wo]
    return torch.cat(columns, dim=1).reshape(batch, channels * taps, out_h * out_w), (out_h, out_w)


def _modulated_deform_conv(x, offset, mask, weight, bias, stride, padding, dilation, groups, deformable_groups):
    out_channels = weight.shape[0]
    columns, (out_h, out_w) = _deform_columns(
        x, offset, mask, weight.shape[-2:], stride, padding, dilation, deformable_groups
    )
    batch = x.shape[0]
    columns = columns.view(batch, groups, -1, out_h * out_w)
    w = weight.view(groups, out_channels // groups, -1)
    out = torch.einsum("gok,bgkn->bgon", w, columns).reshape(batch, out_channels, out_h, out_w)
    return out if bias is None else out + bias.view(1, -1, 1, 1)


class ModulatedDeformConv2dFunction(torch.autograd.Function):
    """The deformable convolution as one autograd node (gradients for input, offset, mask, weight, bias)."""

    @staticmethod
    def forward(
        ctx,
        input_tensor,
        offset_ori,
        mask,
        weight,
        bias=None,
        with_bias=False,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        deformable_groups=1,
        sort_index_for_npu_fp=None,
        sort_index_for_npu_bp=None,
    ):
        ctx.conf = (_pair(stride), _pair(padding), _pair(dilation), groups, deformable_groups, with_bias)
        ctx.save_for_backward(input_tensor, offset_ori, mask, weight, bias if with_bias else None)
        stride, padding, dilation = ctx.conf[:3]
        return _modulated_deform_conv(
            input_tensor,
            offset_ori,
            mask,
            weight,
            bias if with_bias else None,
            stride,
            padding,
            dilation,
            groups,
            deformable_groups,
        )

    @staticmethod
    def backward(ctx, grad_output):
        stride, padding, dilation, groups, deformable_groups, with_bias = ctx.conf
        saved = ctx.saved_tensors
        inputs = [t.detach().requires_grad_(True) if t is not None else None for t in saved]
        with torch.enable_grad():
            out = _modulated_deform_conv(*inputs, stride, padding, dilation, groups, deformable_groups)
        wanted = [t for t in inputs if t is not None]
        grads = torch.autograd.grad(out, wanted, grad_output, allow_unused=True)
        grads = list(grads) + [None] * (5 - len(grads))
        return tuple(grads[:5]) + (None,) * 8


class ModulatedDeformConv(nn.Module):
    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        deformable_groups=1,
        bias=True,
        pack=True,
    ):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride, self.padding, self.dilation = _pair(stride), _pair(padding), _pair(dilation)
        self.groups, self.deformable_groups = groups, deformable_groups
        self.with_bias, self.pack = bias, pack
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels // groups, *self.kernel_size))
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        if pack:
            self.conv_offset_mask = nn.Conv2d(
                in_channels,
                deformable_groups * 3 * self.kernel_size[0] * self.kernel_size[1],
                self.kernel_size,
                self.stride,
                self.padding,
                self.dilation,
                bias=True,
            )
        self.init_param()

    def init_param(self):
        """Weights uniform in +-1/sqrt(fan_in), bias and the offset/mask predictor zero."""
        n = self.in_channels * self.kernel_size[0] * self.kernel_size[1]
        bound = 1.0 / math.sqrt(n)
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        if self.pack:
            nn.init.zeros_(self.conv_offset_mask.weight)
            nn.init.zeros_(self.conv_offset_mask.bias)

    def forward(self, x):
        if not self.pack:
            raise RuntimeError(
                "ModulatedDeformConv(pack=False) takes offset and mask from the caller: call "
                "ModulatedDeformConv2dFunction.apply(x, offset, mask, weight, bias, ...) directly"
            )
        out = self.conv_offset_mask(x)
        o1, o2, mask = torch.chunk(out, 3, dim=1)
        offset = torch.cat((o1, o2), dim=1)
        return ModulatedDeformConv2dFunction.apply(
            x,
            offset,
            torch.sigmoid(mask),
            self.weight,
            self.bias,
            self.with_bias,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
            self.deformable_groups,
        )


# torch_npu's second name for the layer (deformable convolution v2).
DCNv2 = ModulatedDeformConv
