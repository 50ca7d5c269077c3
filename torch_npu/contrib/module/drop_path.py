"""NpuDropPath: stochastic depth (drop whole residual branches per sample while training)."""

import torch
from torch import nn

__all__ = ["NpuDropPath"]


class NpuDropPath(nn.Module):
    """x / keep_prob * bernoulli(keep_prob) per sample, keep_prob = 1 - drop_prob (identity in eval)."""

    def __init__(self, drop_prob=None):
        super().__init__()
        self.drop_prob = drop_prob

    @staticmethod
    def enable_droppath_ensemble(model):
        """torch_npu pre-generates the masks of all drop-path modules of a model in one task; the
        masks have the same distribution either way, so this only marks the modules."""
        for module in model.modules():
            if isinstance(module, NpuDropPath):
                module._ensemble = True

    def forward(self, x):
        if not self.drop_prob or not self.training:
            return x
        keep_prob = 1.0 - self.drop_prob
        shape = (x.shape[0],) + (1,) * (x.dim() - 1)
        mask = torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(keep_prob)
        return x.div(keep_prob) * mask
