"""ChannelShuffle of ShuffleNetV2: concatenate two branches, interleave their channel groups and
(split_shuffle) split the result in two, using index_select as torch_npu does."""

import torch
from torch import nn

from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = [
    "ChannelShuffle",
    "IndexSelectFullImplementation",
    "IndexSelectHalfImplementation",
    "indexselect_full_implementation_forward",
    "indexselect_half_implementation_forward",
]


def indexselect_full_implementation_forward(x1, x2, fp_index):
    return torch.cat([x1, x2], dim=1).index_select(1, fp_index)


def indexselect_half_implementation_forward(x1, x2, fp_index1, fp_index2):
    x = torch.cat([x1, x2], dim=1)
    return x.index_select(1, fp_index1), x.index_select(1, fp_index2)


class IndexSelectFullImplementation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x1, x2, fp_index, bp_index1, bp_index2):
        ctx.save_for_backward(bp_index1, bp_index2)
        return indexselect_full_implementation_forward(x1, x2, fp_index)

    @staticmethod
    def backward(ctx, grad_output):
        bp_index1, bp_index2 = ctx.saved_tensors
        return grad_output.index_select(1, bp_index1), grad_output.index_select(1, bp_index2), None, None, None


class IndexSelectHalfImplementation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x1, x2, fp_index1, fp_index2, bp_index1, bp_index2):
        ctx.save_for_backward(bp_index1, bp_index2)
        return indexselect_half_implementation_forward(x1, x2, fp_index1, fp_index2)

    @staticmethod
    def backward(ctx, grad_output1, grad_output2):
        bp_index1, bp_index2 = ctx.saved_tensors
        grad = torch.cat([grad_output1, grad_output2], dim=1)
        return grad.index_select(1, bp_index1), grad.index_select(1, bp_index2), None, None, None, None


class ChannelShuffle(nn.Module):
    def __init__(self, in_channels, groups=2, split_shuffle=True):
        super().__init__()
        if in_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) must be divisible by groups ({groups})")
        self.in_channels = in_channels
        self.groups = groups
        self.split_shuffle = split_shuffle
        perm = torch.arange(in_channels).view(groups, in_channels // groups).t().reshape(-1)
        inverse = torch.argsort(perm)
        half = in_channels // 2
        self.register_buffer("fp_index", perm, persistent=False)
        self.register_buffer("bp_index1", inverse[:half].clone(), persistent=False)
        self.register_buffer("bp_index2", inverse[half:].clone(), persistent=False)
        self.register_buffer("fp_index1", perm[:half].clone(), persistent=False)
        self.register_buffer("fp_index2", perm[half:].clone(), persistent=False)

    def check_self(self, x):
        """Raise when the two branches together have fewer than in_channels channels. A wider concatenation is
        torch_npu's case too: the indices pick from its first in_channels channels."""
        channels = x[0].size(1) + x[1].size(1) if isinstance(x, (list, tuple)) else x.size(1)
        if channels < self.in_channels:
            raise RuntimeError(
                f"ChannelShuffle expects at least {self.in_channels} channels, got {channels}"
                + ops_error(ErrCode.PARAM)
            )

    def forward(self, x1, x2):
        self.check_self((x1, x2))
        if self.split_shuffle:
            return IndexSelectHalfImplementation.apply(
                x1, x2, self.fp_index1, self.fp_index2, self.bp_index1, self.bp_index2
            )
        return IndexSelectFullImplementation.apply(x1, x2, self.fp_index, self.bp_index1, self.bp_index2)
