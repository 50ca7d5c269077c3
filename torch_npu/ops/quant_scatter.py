"""npu_quant_scatter(_): quantise updates to int8 (npu_quantize along quant_axis: round(updates / scales +
zero_points), saturated) and write them into self as scatter_update does: for each batch b, the slice starting
at indices[b] along `axis`. The in-place form functionalizes to the out-of-place one."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.functionalization import functionalized_by
from torch_npu.ops.registration import npu_op

__all__ = []

_ARGS = (
    "Tensor indices, Tensor updates, Tensor quant_scales, Tensor? quant_zero_points=None, int axis=-2, "
    "int quant_axis=-1, str reduce='update', int? dst_type=None, str? round_mode='rint'"
)


def _quantised_updates(op, data, updates, quant_scales, quant_zero_points, quant_axis, reduce, dst_type, round_mode):
    check(data.dtype == torch.int8, op, f"self must be int8, got {data.dtype}")
    check(reduce == "update", op, f"reduce must be 'update', got {reduce!r}")
    check(round_mode in (None, "rint"), op, f"round_mode must be 'rint', got {round_mode!r}")
    check(dst_type in (None, 1), op, f"dst_type must be int8 (1), got {dst_type}")  # 1: ScalarType Char
    channels = updates.shape[quant_axis]
    check(
        quant_scales.numel() == channels,
        op,
        f"quant_scales must hold one scale per element of updates' axis {quant_axis} ({channels}), "
        f"got {quant_scales.numel()}",
    )
    zero_points = None if quant_zero_points is None else quant_zero_points.reshape(-1)
    axis = quant_axis % updates.dim()
    return torch.ops.npu.npu_quantize(updates, quant_scales.reshape(-1), zero_points, torch.qint8, axis).to(torch.int8)


@npu_op(f"npu_quant_scatter(Tensor self, {_ARGS}) -> Tensor")
def npu_quant_scatter(
    data,
    indices,
    updates,
    quant_scales,
    quant_zero_points=None,
    axis=-2,
    quant_axis=-1,
    reduce="update",
    dst_type=None,
    round_mode="rint",
):
    op = "npu_quant_scatter"
    quantised = _quantised_updates(
        op, data, updates, quant_scales, quant_zero_points, quant_axis, reduce, dst_type, round_mode
    )
    return torch.ops.npu.scatter_update(data, indices, quantised, axis)


@npu_op(f"npu_quant_scatter_(Tensor(a!) self, {_ARGS}) -> Tensor(a!)")
def npu_quant_scatter_(
    data,
    indices,
    updates,
    quant_scales,
    quant_zero_points=None,
    axis=-2,
    quant_axis=-1,
    reduce="update",
    dst_type=None,
    round_mode="rint",
):
    op = "npu_quant_scatter_"
    quantised = _quantised_updates(
        op, data, updates, quant_scales, quant_zero_points, quant_axis, reduce, dst_type, round_mode
    )
    return torch.ops.npu.scatter_update_(data, indices, quantised, axis)


functionalized_by("npu_quant_scatter_", "npu_quant_scatter")
