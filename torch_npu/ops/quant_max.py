"""npu_quant_max: x * scale cast to an 8-bit float, with the largest magnitude of x (per group of rows).

    y = cast(x_g * scale[g], dst_dtype, round_mode)      amax[g] = max(|x_g|)

x_g are the rows group_list[g-1] <= r < group_list[g] of dim 0 (group_list: cumulative ends; without it one
group, the whole tensor). dst_dtype is torch.float8_e5m2 (torch_npu's default, 291), torch.float8_e4m3fn (292)
with round_mode "rint" (round half to even), or torch_npu.hifloat8 (290) with "round" (half away from zero);
HiFloat8 results are uint8 codes (torch_npu.utils.hifloat8). amax has x's dtype, one value per group.
"""

import torch

from torch_npu._c_children import DTypeNumber
from torch_npu.ops._common import _SCALAR_TYPES, check
from torch_npu.ops.registration import npu_op
from torch_npu.utils import hifloat8

__all__ = []

_OP = "npu_quant_max"
_DST = {
    int(DTypeNumber.hifloat8): "hifloat8",
    291: torch.float8_e5m2,
    292: torch.float8_e4m3fn,
    23: torch.float8_e5m2,
    24: torch.float8_e4m3fn,
}
_ROUNDING = {"hifloat8": ("round",), torch.float8_e5m2: ("rint",), torch.float8_e4m3fn: ("rint",)}


def _destination(dst_dtype, round_mode):
    dst = _DST.get(int(dst_dtype) if not isinstance(dst_dtype, torch.dtype) else dst_dtype, dst_dtype)
    named = _SCALAR_TYPES.get(dst_dtype, dst_dtype) if isinstance(dst_dtype, int) else dst_dtype
    check(
        dst in _ROUNDING,
        _OP,
        f"dst_dtype must be torch.float8_e5m2, torch.float8_e4m3fn or torch_npu.hifloat8, got {named}",
    )
    allowed = _ROUNDING[dst]
    check(round_mode in allowed, _OP, f"round_mode {round_mode!r} is not supported with this dst_dtype (supported: {', '.join(allowed)})")  # fmt: skip
    return dst


def _ends(x, scale, group_list):
    if group_list is None:
        check(scale.numel() == 1, _OP, f"scale must hold one value without group_list, got {scale.numel()}")
        return [x.shape[0] if x.dim() else 1]
    check(group_list.dim() == 1 and group_list.numel() == scale.numel(), _OP, "group_list and scale must be 1-D with one value per group")  # fmt: skip
    ends = [int(e) for e in group_list.tolist()]
    check(all(a <= b for a, b in zip([0, *ends], ends)) and ends[-1] <= x.shape[0], _OP,
          f"group_list must be non-decreasing cumulative row ends within x's {x.shape[0]} rows, got {ends}")  # fmt: skip
    return ends


def _fake(x, scale, *, round_mode="rint", dst_dtype=291, group_list=None):
    dst = _destination(dst_dtype, round_mode)
    groups = 1 if group_list is None else group_list.shape[0]
    return x.new_empty(x.shape, dtype=torch.uint8 if dst == "hifloat8" else dst), x.new_empty(groups)


@npu_op(
    'npu_quant_max(Tensor x, Tensor scale, *, str round_mode="rint", int dst_dtype=291, Tensor? group_list=None) '
    "-> (Tensor, Tensor)",
    fake=_fake,
)
def npu_quant_max(x, scale, *, round_mode="rint", dst_dtype=291, group_list=None):
    """(y, amax): x * scale cast to dst_dtype, and max |x| per group."""
    dst = _destination(dst_dtype, round_mode)
    check(x.dtype in (torch.float32, torch.float16, torch.bfloat16), _OP, f"x must be float32, float16 or bfloat16, got {x.dtype}")  # fmt: skip
    check(scale.dim() == 1 and scale.dtype == torch.float32, _OP, "scale must be a 1-D float32 tensor")
    ends = _ends(x, scale, group_list)
    flat = x.reshape(x.shape[0] if x.dim() else 1, -1).float()
    scaled, amax, start = torch.empty_like(flat), [], 0
    for g, end in enumerate(ends):
        scaled[start:end] = flat[start:end] * scale[g]
        amax.append(flat[start:end].abs().amax() if end > start else flat.new_zeros(()))
        start = end
    scaled[start:] = 0  # rows after the last group are not quantized
    y = hifloat8.encode(scaled) if dst == "hifloat8" else scaled.to(dst)
    return y.reshape(x.shape), torch.stack(amax).to(x.dtype)
