"""YOLOv5's Focus: space-to-depth slicing followed by Conv (conv + batch norm + SiLU)."""

import torch
from torch import nn

__all__ = ["Focus", "Conv", "autopad", "fast_slice"]


def autopad(k, p=None):
    """'same' padding for kernel size k."""
    if p is None:
        p = k // 2 if isinstance(k, int) else [x // 2 for x in k]
    return p


def fast_slice(x):
    """The four pixel phases of x: [::2, ::2], [1::2, ::2], [::2, 1::2], [1::2, 1::2] of the last two dims."""
    return [x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]]


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p), groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU() if act is True else (act if isinstance(act, nn.Module) else nn.Identity())

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))

    def fuseforward(self, x):
        """The forward once batch norm is folded into the convolution."""
        return self.act(self.conv(x))


class Focus(nn.Module):
    """x [B, c1, H, W] -> Conv(cat(fast_slice(x))) [B, c2, H/2, W/2]."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = Conv(c1 * 4, c2, k, s, p, g, act)

    def forward(self, x):
        return self.conv(torch.cat(fast_slice(x), 1))
