"""ROIAlign (Mask R-CNN): average of bilinear samples in each output bin of each region.

rois [K, 5] = (batch index, x1, y1, x2, y2) in input coordinates, scaled by spatial_scale; with
aligned=True pixel centres are shifted by -0.5 (torchvision's aligned=True). sampling_ratio <= 0
samples ceil(roi size / output size) points per bin. A sample outside [-1, size] reads 0; inside,
coordinates are clamped to the border before interpolating.
"""
import math

import torch
from torch import nn

__all__ = ["ROIAlign"]


def _interp_weights(coords, size):
    """[n, size] bilinear weights of each coordinate along one axis (rows of zeros outside)."""
    weights = coords.new_zeros(coords.numel(), size)
    valid = (coords >= -1.0) & (coords <= size)
    c = coords.clamp(min=0)
    low = c.floor().long().clamp(max=size - 1)
    at_end = low >= size - 1
    high = torch.where(at_end, low, low + 1)
    frac = torch.where(at_end, torch.zeros_like(c), c - low.to(c.dtype))
    rows = torch.arange(coords.numel(), device=coords.device)
    weights.index_put_((rows, low), torch.where(valid, 1 - frac, torch.zeros_like(frac)), accumulate=True)
    weights.index_put_((rows, high), torch.where(valid, frac, torch.zeros_like(frac)), accumulate=True)
    return weights


def roi_align(features, rois, output_size, spatial_scale, sampling_ratio, aligned):
    ph, pw = output_size
    channels, height, width = features.shape[1:]
    out = features.new_zeros(rois.shape[0], channels, ph, pw)
    offset = 0.5 if aligned else 0.0
    for k, roi in enumerate(rois.tolist()):
        batch = int(roi[0])
        x1, y1, x2, y2 = (v * spatial_scale - offset for v in roi[1:])
        roi_w, roi_h = x2 - x1, y2 - y1
        if not aligned:
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        bin_h, bin_w = roi_h / ph, roi_w / pw
        grid_h = sampling_ratio if sampling_ratio > 0 else max(math.ceil(roi_h / ph), 1)
        grid_w = sampling_ratio if sampling_ratio > 0 else max(math.ceil(roi_w / pw), 1)
        dtype, device = features.dtype, features.device
        ys = y1 + (torch.arange(ph, dtype=dtype, device=device)[:, None] * bin_h
                   + (torch.arange(grid_h, dtype=dtype, device=device)[None, :] + 0.5) * bin_h / grid_h)
        xs = x1 + (torch.arange(pw, dtype=dtype, device=device)[:, None] * bin_w
                   + (torch.arange(grid_w, dtype=dtype, device=device)[None, :] + 0.5) * bin_w / grid_w)
        wy = _interp_weights(ys.reshape(-1), height)  # [ph*gh, H]
        wx = _interp_weights(xs.reshape(-1), width)   # [pw*gw, W]
        samples = wy @ features[batch] @ wx.t()       # [C, ph*gh, pw*gw]
        out[k] = samples.view(channels, ph, grid_h, pw, grid_w).sum(dim=(2, 4)) / (grid_h * grid_w)
    return out


class ROIAlign(nn.Module):
    def __init__(self, output_size, spatial_scale, sampling_ratio, aligned=True):
        super().__init__()
        self.output_size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
        self.spatial_scale = spatial_scale
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned

    def forward(self, input_tensor, rois):
        return roi_align(input_tensor, rois, self.output_size, self.spatial_scale, self.sampling_ratio, self.aligned)

    def __repr__(self):
        return (f"{type(self).__name__}(output_size={self.output_size}, spatial_scale={self.spatial_scale}, "
                f"sampling_ratio={self.sampling_ratio}, aligned={self.aligned})")
