"""LabelSmoothingCrossEntropy: cross entropy against labels smoothed as torch_npu smooths them
(the target class gets 1 - smooth_factor, every other class smooth_factor / (num_classes - 1))."""

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["LabelSmoothingCrossEntropy"]


class LabelSmoothingCrossEntropy(nn.Module):
    def __init__(self, num_classes=1000, smooth_factor=0.0):
        super().__init__()
        self.num_classes = num_classes
        self.smooth_factor = smooth_factor
        self.confidence = 1.0 - smooth_factor

    def forward(self, pred, target):
        off_value = self.smooth_factor / (self.num_classes - 1) if self.num_classes > 1 else 0.0
        labels = torch.full_like(pred, off_value)
        labels.scatter_(1, target.long().unsqueeze(1), self.confidence)
        return (-(labels * F.log_softmax(pred, dim=1)).sum(dim=1)).mean()
