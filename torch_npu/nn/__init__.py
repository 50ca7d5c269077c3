"""torch_npu.nn: names some Ascend articles import from it. The real torch_npu has no such module;
each name works (see below) and warns once that it is a vnpu extension.

SyncBatchNorm: torch.nn.SyncBatchNorm. FusedAttention(embed_dim, num_heads, ...): torch.nn.MultiheadAttention.
"""

import torch

from torch_npu.utils._vnpu_extensions import warn_extension

__all__ = ["SyncBatchNorm", "FusedAttention"]


class FusedAttention(torch.nn.MultiheadAttention):
    """Multi-head attention (the article's fused attention); computes torch.nn.MultiheadAttention."""


_EXTENSIONS = {
    "SyncBatchNorm": (torch.nn.SyncBatchNorm, "it is torch.nn.SyncBatchNorm"),
    "FusedAttention": (FusedAttention, "it computes torch.nn.MultiheadAttention"),
}
del FusedAttention


def __getattr__(name):
    if name in _EXTENSIONS:
        value, effect = _EXTENSIONS[name]
        warn_extension(f"torch_npu.nn.{name}", effect)
        return value
    raise AttributeError(f"module 'torch_npu.nn' has no attribute {name!r}")
