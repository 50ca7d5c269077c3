"""npu_gelu_quant: GELU, then quantisation of the result (GeluQuant).

    g = gelu(x)   (approximate 'none': erf form, 'tanh')
    static:   y = round(g * input_scale + input_offset) to dst_type                 (out_scale is empty)
    dynamic:  g = g * input_scale (when given);  out_scale = max|g| per row / maxValue;  y = round(g / out_scale)

dst_type int8 (the default; maxValue 127, saturated), torch.float8_e4m3fn (448), torch.float8_e5m2 (57344) or
torch_npu.hifloat8 (32768; uint8 codes, round_mode 'round'); round_mode 'rint' (half to even) otherwise.
input_scale / input_offset hold one value or one per column. Computed in float32.
"""

import torch
import torch.nn.functional as F

from torch_npu._c_children import DTypeNumber
from torch_npu.ops._common import _SCALAR_TYPES, check
from torch_npu.ops.registration import npu_op
from torch_npu.utils import hifloat8

__all__ = []

_OP = "npu_gelu_quant"
_MAX = {torch.int8: 127.0, torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0, "hifloat8": 32768.0}


def _destination(dst_type, round_mode):
    if dst_type is None:
        dst = torch.int8
    elif int(dst_type) == int(DTypeNumber.hifloat8):
        dst = "hifloat8"
    else:
        dst = {291: torch.float8_e5m2, 292: torch.float8_e4m3fn}.get(int(dst_type)) or _SCALAR_TYPES.get(int(dst_type))
    check(dst in _MAX, _OP, f"dst_type must be torch.int8, torch.float8_e4m3fn, torch.float8_e5m2 or torch_npu.hifloat8, got {dst_type}")  # fmt: skip
    allowed = ("round",) if dst == "hifloat8" else ("rint",)
    check(
        round_mode in allowed,
        _OP,
        f"round_mode {round_mode!r} is not supported with this dst_type ({', '.join(allowed)})",
    )
    return dst


def _cast(values, dst):
    if dst == "hifloat8":
        return hifloat8.encode(values)
    if dst == torch.int8:
        return torch.round(values).clamp(-128, 127).to(torch.int8)
    return values.clamp(-_MAX[dst], _MAX[dst]).to(dst)


def _fake(x, *, input_scale=None, input_offset=None, approximate="none", quant_mode="dynamic", dst_type=None,
          round_mode="rint"):  # fmt: skip
    dst = _destination(dst_type, round_mode)
    y = x.new_empty(x.shape, dtype=torch.uint8 if dst == "hifloat8" else dst)
    return y, x.new_empty(x.shape[:-1] if quant_mode == "dynamic" else (0,), dtype=torch.float32)


@npu_op(
    "npu_gelu_quant(Tensor self, *, Tensor? input_scale=None, Tensor? input_offset=None, str approximate='none', "
    "str quant_mode='dynamic', int? dst_type=None, str round_mode='rint') -> (Tensor, Tensor)",
    fake=_fake,
)
def npu_gelu_quant(x, *, input_scale=None, input_offset=None, approximate="none", quant_mode="dynamic", dst_type=None,
                   round_mode="rint"):  # fmt: skip
    """(y, out_scale): the quantised GELU of x and, in dynamic mode, the per-row scales."""
    dst = _destination(dst_type, round_mode)
    check(approximate in ("none", "tanh"), _OP, f"approximate must be 'none' or 'tanh', got {approximate!r}")
    check(quant_mode in ("static", "dynamic"), _OP, f"quant_mode must be 'static' or 'dynamic', got {quant_mode!r}")
    for name, t in (("input_scale", input_scale), ("input_offset", input_offset)):
        check(
            t is None or t.numel() in (1, x.shape[-1]),
            _OP,
            f"{name} must hold one value or one per column ({x.shape[-1]})",
        )
    g = F.gelu(x.float(), approximate=approximate)
    if quant_mode == "static":
        check(input_scale is not None, _OP, "quant_mode 'static' needs input_scale")
        shifted = g * input_scale.float() + (0.0 if input_offset is None else input_offset.float())
        return _cast(shifted, dst), x.new_empty(0, dtype=torch.float32)
    if input_scale is not None:
        g = g * input_scale.float()
    out_scale = g.abs().amax(-1) / _MAX[dst]
    safe = torch.where(out_scale > 0, out_scale, 1.0)
    return _cast(g / safe[..., None], dst), out_scale
