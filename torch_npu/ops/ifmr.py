"""npu_ifmr: IFMR (input feature map reconstruction) calibration of an int8 quantisation scale.

From the cumulative histogram of data (bins_num = cumsum.numel() bins over [data_min, data_max]), the initial
clipping bounds are where the cumulative fraction first reaches max_percentile and 1 - min_percentile. Each
candidate max_init * step, step in arange(search_start, search_end, search_step), gives a scale (and with
with_offset an asymmetric offset); the candidate whose quantise-dequantise round trip (round, clip to
[-128, 127]) has the smallest squared error over data wins. Returns (scale [1], offset [1]), float32.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_ifmr"
_EPSILON = 1.192092896e-07


def _initial_bounds(data, data_min, data_max, cumsum, min_percentile, max_percentile):
    bins = cumsum.numel()
    cdf = cumsum / data.numel()
    max_index = torch.sum(torch.where(cdf >= max_percentile, 0, 1))
    min_index = torch.sum(torch.where(cdf >= (1 - min_percentile), 0, 1))
    span = data_max - data_min
    return max_index / bins * span + data_min, min_index / bins * span + data_min


@npu_op(
    "npu_ifmr(Tensor data, Tensor data_min, Tensor data_max, Tensor cumsum, float min_percentile, "
    "float max_percentile, float search_start, float search_end, float search_step, bool with_offset) "
    "-> (Tensor, Tensor)",
    fake=lambda data, *args: (data.new_empty(1, dtype=torch.float32), data.new_empty(1, dtype=torch.float32)),
)
def npu_ifmr(
    data,
    data_min,
    data_max,
    cumsum,
    min_percentile,
    max_percentile,
    search_start,
    search_end,
    search_step,
    with_offset,
):
    check(data.numel() > 0, _OP, "data must not be empty")
    check(data_min.numel() == 1 and data_max.numel() == 1, _OP, "data_min and data_max must hold one value each")
    check(cumsum.dim() == 1 and cumsum.numel() > 0, _OP, f"cumsum must be a 1-D histogram, got {tuple(cumsum.shape)}")
    check(
        0 < search_step and search_start < search_end,
        _OP,
        f"the search range [{search_start}, {search_end}) with step {search_step} is empty",
    )
    data = data.float()
    max_init, min_init = _initial_bounds(
        data, data_min.float().reshape(1), data_max.float().reshape(1), cumsum, min_percentile, max_percentile
    )
    steps = torch.arange(search_start, search_end, search_step, device=data.device)
    if with_offset:
        max_init = max_init.clamp(min=0)
        min_init = min_init.clamp(max=0)
        max_list = max_init * steps
        scale = (max_list - min_init * torch.ones_like(steps)) / 255
        scale = torch.where(scale < _EPSILON, torch.ones_like(scale), scale)
        offset = -(torch.round(min_init / scale) + 128)
    else:
        max_list = torch.max(max_init.abs(), min_init.abs()) * steps
        scale = max_list / 127
        offset = torch.round(scale * 0)
    losses = torch.stack(
        [
            torch.sum(torch.square((torch.round(data / s) + o).clip(-128, 127).sub(o).mul(s) - data))
            for s, o in zip(scale.unbind(), offset.unbind())
        ]
    )
    best = torch.argmin(losses)
    return scale[best].reshape(1), offset[best].reshape(1)
