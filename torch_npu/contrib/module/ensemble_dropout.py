"""Fairseq-style dropout modules (NpuFairseqDropout, NpuCachedDropout)."""

import torch.nn.functional as F
from torch import nn

__all__ = ["NpuFairseqDropout", "NpuCachedDropout"]


class NpuFairseqDropout(nn.Module):
    """Dropout with probability p while training (or always when apply_during_inference is set)."""

    def __init__(self, p, module_name=None):
        super().__init__()
        self.p = p
        self.module_name = module_name
        self.apply_during_inference = False

    @staticmethod
    def enable_dropout_ensemble(model):
        """torch_npu generates the masks of all such modules together; the distribution is the same,
        so this only marks the modules."""
        for module in model.modules():
            if isinstance(module, NpuFairseqDropout):
                module._ensemble = True

    def forward(self, x):
        if self.p > 0 and (self.training or self.apply_during_inference):
            return F.dropout(x, p=self.p, training=True)
        return x


class NpuCachedDropout(NpuFairseqDropout):
    """NpuFairseqDropout whose masks torch_npu caches per module."""
