"""FastBatchNorm1d/2d/3d and FastSyncBatchNorm: batch norms whose num_batches_tracked is int32.

torch_npu keeps the step counter in int32 because the card updates an int64 scalar slowly; the normalisation,
the running statistics and the momentum rule (cumulative average when momentum is None) are torch.nn's. A
checkpoint of a plain BatchNorm loads into them (its int64 counter is copied into the int32 buffer).
"""

import torch
from torch import nn

from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = ["FastBatchNorm1d", "FastBatchNorm2d", "FastBatchNorm3d", "FastSyncBatchNorm"]


def _int32_counter(module):
    if module.track_running_stats:
        counter = module.num_batches_tracked
        module.num_batches_tracked = torch.zeros((), dtype=torch.int32, device=counter.device)


def _expected_dims(dims, text):
    def check(self, input1):
        if input1.dim() not in dims:
            raise ValueError(f"expected {text} input1 (got {input1.dim()}D input1)" + ops_error(ErrCode.VALUE))

    return check


class FastBatchNorm1d(nn.BatchNorm1d):
    """nn.BatchNorm1d over (N, C) or (N, C, L) with an int32 num_batches_tracked."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        _int32_counter(self)

    _check_input_dim = _expected_dims((2, 3), "2D or 3D")


class FastBatchNorm2d(nn.BatchNorm2d):
    """nn.BatchNorm2d over (N, C, H, W) with an int32 num_batches_tracked."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        _int32_counter(self)

    _check_input_dim = _expected_dims((4,), "4D")


class FastBatchNorm3d(nn.BatchNorm3d):
    """nn.BatchNorm3d over (N, C, D, H, W) with an int32 num_batches_tracked."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        _int32_counter(self)

    _check_input_dim = _expected_dims((5,), "5D")


class FastSyncBatchNorm(nn.SyncBatchNorm):
    """nn.SyncBatchNorm (statistics all-reduced over process_group in training) with an int32
    num_batches_tracked; without a process group of more than one rank it is a plain batch norm."""

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        process_group=None,
        device=None,
        dtype=None,
    ):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, process_group, device, dtype)
        _int32_counter(self)

    def _check_input_dim(self, input1):
        if input1.dim() < 2:
            raise ValueError(f"expected at least 2D input1 (got {input1.dim()}D input1)" + ops_error(ErrCode.VALUE))

    def _check_non_zero_input_channels(self, input1):
        if input1.size(1) == 0:
            raise ValueError("SyncBatchNorm number of input1 channels should be non-zero" + ops_error(ErrCode.VALUE))

    def forward(self, input1):
        if not (input1.is_cuda or input1.device.type == "npu"):
            raise ValueError("SyncBatchNorm expected input1 tensor to be on NPU or GPU" + ops_error(ErrCode.VALUE))
        return super().forward(input1)
