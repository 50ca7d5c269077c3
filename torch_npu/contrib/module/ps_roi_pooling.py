"""PSROIPool (R-FCN position-sensitive ROI pooling). rois are torch_npu's [batch, 5, rois_num] (columns of
(batch index, x1, y1, x2, y2)) or [K, 5], one RoI per row; the output is [batch * rois_num (or K), output_dim,
pooled_height, pooled_width].

With pooled_height == pooled_width == group_size (the case torch_npu implements) it runs
torch_npu.npu_ps_roi_pooling; other pooled sizes use the same pooling with bins mapped onto the groups.
"""

from torch import nn

import torch_npu
from torch_npu.ops.ps_roi_pooling import ps_roi_pool

__all__ = ["PSROIPool"]


class PSROIPool(nn.Module):
    def __init__(self, pooled_height=7, pooled_width=7, spatial_scale=1 / 16, group_size=7, output_dim=22):
        super().__init__()
        self.pooled_height = pooled_height
        self.pooled_width = pooled_width
        self.spatial_scale = spatial_scale
        self.group_size = group_size
        self.output_dim = output_dim

    def forward(self, features, rois):
        ph, pw, gs = self.pooled_height, self.pooled_width, self.group_size
        if features.shape[1] != self.output_dim * gs * gs:
            raise RuntimeError(f"PSROIPool expects {self.output_dim * gs * gs} channels, got {features.shape[1]}")
        if rois.dim() == 2:  # [K, 5]: one RoI per row
            rois = rois.t().unsqueeze(0)
        if ph == pw == gs:
            return torch_npu.npu_ps_roi_pooling(features, rois, self.spatial_scale, gs, self.output_dim)
        flat = rois.transpose(1, 2).reshape(-1, 5)
        return ps_roi_pool(features, flat, self.spatial_scale, gs, self.output_dim, ph, pw)
