"""Position-sensitive RoI pooling (R-FCN): npu_ps_roi_pooling, and the pooling that
torch_npu.contrib.module.PSROIPool runs.

x is [batch, output_dim * group_size^2, H, W]; an RoI is (batch index, x1, y1, x2, y2). Its corners are
rounded to pixels and scaled (the end corner exclusive: (round(x2) + 1) * spatial_scale); output bin (i, j)
of channel c averages input channel (c * group_size + gi) * group_size + gj over the bin's pixels, with
gi = floor(i * group_size / pooled_height) (gi = i when the pooled size is the group size); an empty bin
is 0. Differentiable in x.
"""

import math

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dtype_support import HALF_AND_FLOAT
from torch_npu.ops.registration import npu_op

__all__ = ["ps_roi_pool"]


def _bin_edges(start, size, bins, limit):
    """[(first, end)] pixel ranges of `bins` bins of width size / bins from start, clipped to [0, limit]."""
    width = size / bins
    return [
        (min(max(math.floor(i * width + start), 0), limit), min(max(math.ceil((i + 1) * width + start), 0), limit))
        for i in range(bins)
    ]


def _roi_bins(rois, spatial_scale, pooled_height, pooled_width, height, width):
    """Per RoI: its batch index and the [first, end) pixel rows of each bin row and columns of each bin column."""
    batches, rows, cols = [], [], []
    for roi in rois.tolist():
        start_w, start_h = round(roi[1]) * spatial_scale, round(roi[2]) * spatial_scale
        end_w, end_h = (round(roi[3]) + 1.0) * spatial_scale, (round(roi[4]) + 1.0) * spatial_scale
        batches.append(int(roi[0]))
        rows.append(_bin_edges(start_h, max(end_h - start_h, 0.1), pooled_height, height))
        cols.append(_bin_edges(start_w, max(end_w - start_w, 0.1), pooled_width, width))
    return batches, rows, cols


def ps_roi_pool(features, rois, spatial_scale, group_size, output_dim, pooled_height, pooled_width):
    """features [N, output_dim * group_size^2, H, W], rois [K, 5] -> [K, output_dim, pooled_height, pooled_width].
    Every bin's mean comes from a summed-area table of the features (float32), so all RoIs pool at once."""
    height, width = features.shape[-2:]
    if rois.shape[0] == 0:
        return features.new_zeros(0, output_dim, pooled_height, pooled_width)
    device = features.device
    batches, rows, cols = _roi_bins(rois, spatial_scale, pooled_height, pooled_width, height, width)
    for k, (b, roi_rows, roi_cols) in enumerate(zip(batches, rows, cols)):
        covers = any(e > f for f, e in roi_rows) and any(e > f for f, e in roi_cols)
        check(
            not covers or 0 <= b < features.shape[0],
            "npu_ps_roi_pooling",
            f"RoI {k} names batch {b}, but the input holds {features.shape[0]}",
        )
    batches = [min(max(b, 0), features.shape[0] - 1) for b in batches]  # RoIs with only empty bins read nothing
    table = torch.nn.functional.pad(features.float().cumsum(-2).cumsum(-1), (1, 0, 1, 0))
    h0, h1 = (torch.tensor([[edge[e] for edge in roi] for roi in rows], device=device) for e in (0, 1))
    w0, w1 = (torch.tensor([[edge[e] for edge in roi] for roi in cols], device=device) for e in (0, 1))
    group_row = torch.tensor([min(i * group_size // pooled_height, group_size - 1) for i in range(pooled_height)])
    group_col = torch.tensor([min(j * group_size // pooled_width, group_size - 1) for j in range(pooled_width)])
    channel = (
        torch.arange(output_dim).view(-1, 1, 1) * group_size * group_size
        + group_row.view(1, -1, 1) * group_size
        + group_col.view(1, 1, -1)
    ).to(device)  # [output_dim, pooled_height, pooled_width]
    batch = torch.tensor(batches, device=device).view(-1, 1, 1, 1)
    channel = channel.unsqueeze(0)
    top, bottom = h0.view(-1, 1, pooled_height, 1), h1.view(-1, 1, pooled_height, 1)
    left, right = w0.view(-1, 1, 1, pooled_width), w1.view(-1, 1, 1, pooled_width)
    total = (
        table[batch, channel, bottom, right]
        - table[batch, channel, top, right]
        - table[batch, channel, bottom, left]
        + table[batch, channel, top, left]
    )
    area = ((bottom - top).clamp(min=0) * (right - left).clamp(min=0)).to(total.dtype)
    pooled = torch.where(area > 0, total / area.clamp(min=1), torch.zeros_like(total))
    return pooled.to(features.dtype)


def _ps_roi_pooling_fake(x, rois, spatial_scale, group_size, output_dim):
    return x.new_empty(rois.shape[0] * rois.shape[2], output_dim, group_size, group_size)


@npu_op(
    "npu_ps_roi_pooling(Tensor self, Tensor rois, float spatial_scale, int group_size, int output_dim) -> Tensor",
    differentiable=True,
    fake=_ps_roi_pooling_fake,
    dtypes={"self": HALF_AND_FLOAT, "rois": HALF_AND_FLOAT},
    api="PSROIPoolingV2",
)
def npu_ps_roi_pooling(x, rois, spatial_scale, group_size, output_dim):
    """x [batch, output_dim * group_size^2, H, W], rois [batch, 5, rois_num] -> [batch * rois_num,
    output_dim, group_size, group_size]."""
    op = "npu_ps_roi_pooling"
    check(0 < group_size < 128, op, f"group_size must be in (0, 128), got {group_size}")
    check(output_dim > 0, op, f"output_dim must be greater than 0, got {output_dim}")
    check(rois.dim() == 3 and rois.shape[1] == 5, op, f"rois must be [batch, 5, rois_num], got {tuple(rois.shape)}")
    check(
        x.dim() == 4 and x.shape[1] == output_dim * group_size * group_size,
        op,
        f"x must be [batch, output_dim * group_size^2 = {output_dim * group_size * group_size}, H, W], "
        f"got {tuple(x.shape)}",
    )
    flat = rois.transpose(1, 2).reshape(-1, 5).float()
    return ps_roi_pool(x, flat, spatial_scale, group_size, output_dim, group_size, group_size)
