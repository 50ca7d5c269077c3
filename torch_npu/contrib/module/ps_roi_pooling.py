"""PSROIPool (R-FCN position-sensitive ROI pooling).

features [N, output_dim * group_size^2, H, W], rois [K, 5] = (batch index, x1, y1, x2, y2). Region
corners are rounded to pixels and scaled (the end corner is exclusive: (round(x2) + 1) * scale);
output bin (i, j) of channel c averages input channel (c * group_size + gi) * group_size + gj over
the bin's pixels, gi = floor(i * group_size / pooled_height); an empty bin is 0.
"""

import math

import torch
from torch import nn

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
        ph, pw, gs, scale = self.pooled_height, self.pooled_width, self.group_size, self.spatial_scale
        height, width = features.shape[-2:]
        if features.shape[1] != self.output_dim * gs * gs:
            raise RuntimeError(f"PSROIPool expects {self.output_dim * gs * gs} channels, got {features.shape[1]}")
        out = features.new_zeros(rois.shape[0], self.output_dim, ph, pw)
        channels = torch.arange(self.output_dim, device=features.device) * gs * gs
        for k, roi in enumerate(rois.tolist()):
            batch = int(roi[0])
            start_w, start_h = round(roi[1]) * scale, round(roi[2]) * scale
            end_w, end_h = (round(roi[3]) + 1.0) * scale, (round(roi[4]) + 1.0) * scale
            bin_w, bin_h = max(end_w - start_w, 0.1) / pw, max(end_h - start_h, 0.1) / ph
            for i in range(ph):
                h0 = min(max(math.floor(i * bin_h + start_h), 0), height)
                h1 = min(max(math.ceil((i + 1) * bin_h + start_h), 0), height)
                gi = min(max(i * gs // ph, 0), gs - 1)
                for j in range(pw):
                    w0 = min(max(math.floor(j * bin_w + start_w), 0), width)
                    w1 = min(max(math.ceil((j + 1) * bin_w + start_w), 0), width)
                    if h1 <= h0 or w1 <= w0:
                        continue
                    gj = min(max(j * gs // pw, 0), gs - 1)
                    region = features[batch].index_select(0, channels + gi * gs + gj)[:, h0:h1, w0:w1]
                    out[k, :, i, j] = region.mean(dim=(1, 2))
        return out
