"""ROIAlign (Mask R-CNN): average of bilinear samples in each output bin of each region.

rois [K, 5] = (batch index, x1, y1, x2, y2) in input coordinates, scaled by spatial_scale; with
aligned=True pixel centres are shifted by -0.5 (torchvision's aligned=True). sampling_ratio <= 0
samples ceil(roi size / output size) points per bin. A sample outside [-1, size] reads 0; inside,
coordinates are clamped to the border before interpolating.
"""

from torch import nn

from torch_npu.ops.boxes import roi_align_reference as roi_align

__all__ = ["ROIAlign"]


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
        return (
            f"{type(self).__name__}(output_size={self.output_size}, spatial_scale={self.spatial_scale}, "
            f"sampling_ratio={self.sampling_ratio}, aligned={self.aligned})"
        )
