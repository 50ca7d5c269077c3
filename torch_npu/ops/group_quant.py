"""npu_group_quant: row groups of x quantised with their own per-column scales (GroupQuant).

    y[r] = round(x[r] * scale[g] + offset)    for the rows group_index[g-1] <= r < group_index[g]

x [S, H], scale [E, H], group_index [E] (cumulative row ends), offset one value (None: 0). Rounding is half to
even, saturated to int8, or to int4 packed eight to an int32 with dst_dtype=torch.quint4x2; rows after the last
group are 0. As in op-plugin, dst_dtype=torch.qint8 means int8.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.quant import INT4_RANGE, pack_int4, packs_int4
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_group_quant"


def _packs_int4(dst_dtype):
    return packs_int4(torch.int8 if dst_dtype == torch.qint8 else dst_dtype, _OP, "dst_dtype")


def _fake(x, scale, group_index, *, offset=None, dst_dtype=None):
    packed = _packs_int4(dst_dtype)
    shape = (*x.shape[:-1], x.shape[-1] // 8) if packed else x.shape
    return x.new_empty(shape, dtype=torch.int32 if packed else torch.int8)


@npu_op(
    "npu_group_quant(Tensor x, Tensor scale, Tensor group_index, *, Tensor? offset=None, ScalarType? dst_dtype=None) "
    "-> Tensor",
    fake=_fake,
)
def npu_group_quant(x, scale, group_index, *, offset=None, dst_dtype=None):
    """Per-group quantised x (int8, or int4 packed in int32)."""
    packed = _packs_int4(dst_dtype)
    check(x.dim() == 2, _OP, f"x must be 2-D [S, H], got {tuple(x.shape)}")
    check(scale.dim() == 2 and scale.shape[1] == x.shape[1], _OP, f"scale must be [E, H={x.shape[1]}], got {tuple(scale.shape)}")  # fmt: skip
    check(group_index.dim() == 1 and group_index.shape[0] == scale.shape[0], _OP, "group_index must be [E], one end per scale row")  # fmt: skip
    check(offset is None or offset.numel() == 1, _OP, "offset must hold one value")
    check(
        not packed or x.shape[1] % 8 == 0,
        _OP,
        f"x's last dim must be a multiple of 8 for int4 output, got {x.shape[1]}",
    )
    ends = [int(e) for e in group_index.tolist()]
    check(all(a <= b for a, b in zip([0, *ends], ends)) and (not ends or ends[-1] <= x.shape[0]), _OP,
          f"group_index must be non-decreasing row ends within x's {x.shape[0]} rows, got {ends}")  # fmt: skip
    rows = torch.searchsorted(group_index.long(), torch.arange(x.shape[0], device=x.device), right=True)
    covered = rows < len(ends)
    values = x.float() * scale.float()[rows.clamp(max=max(len(ends) - 1, 0))] + (
        0.0 if offset is None else offset.float()
    )
    values = torch.where(covered[:, None], values, 0.0)
    if packed:
        return pack_int4(torch.round(values).clamp(*INT4_RANGE))
    return torch.round(values).clamp(-128, 127).to(torch.int8)
