"""npu_sub_sample: the balanced positive / negative sampling of detection heads (SubSample; Detectron's
BalancedPositiveNegativeSampler).

labels: int32 [N] with 1 = positive, 0 = negative, -1 = ignored. At most int(per_images * positive_fraction)
positives are kept, then negatives up to per_images in total; each subset is drawn uniformly at random (the
device's generator) and every label not drawn becomes -1.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []


def _drawn(candidates, count):
    """A random subset of `count` of the positions where candidates holds."""
    order = torch.randperm(candidates.numel(), device=candidates.device)
    keys = torch.where(candidates, order, order.new_full((), candidates.numel()))  # non-candidates rank last
    picked = torch.zeros_like(candidates)
    picked[keys.argsort()[:count]] = True
    return picked & candidates


@npu_op("npu_sub_sample(Tensor self, int per_images, float positive_fraction) -> Tensor", fake=lambda x, *a: torch.empty_like(x))  # fmt: skip
def npu_sub_sample(labels, per_images, positive_fraction):
    """labels with all but the sampled positives and negatives set to -1."""
    op = "npu_sub_sample"
    check(labels.dim() == 1, op, f"self must be a 1-D label tensor, got {tuple(labels.shape)}")
    check(per_images >= 0, op, f"per_images must be >= 0, got {per_images}")
    check(0.0 <= positive_fraction <= 1.0, op, f"positive_fraction must be in [0, 1], got {positive_fraction}")
    positives, negatives = labels == 1, labels == 0
    num_pos = min(int(positives.sum()), int(per_images * positive_fraction))
    num_neg = min(int(negatives.sum()), per_images - num_pos)
    keep = _drawn(positives, num_pos) | _drawn(negatives, num_neg)
    return torch.where(keep, labels, torch.full_like(labels, -1))
