"""npu_rms_norm_quant_v2: RmsNorm and a static quantisation fused, with the rstd output (RmsNormQuantV2):

    y = x / rms(x) * gamma [+ beta];  y_q = round(y / scale + offset) (div_mode) or round(y * scale + offset)

dst_dtype: int8 (the default), torch.quint4x2 (int4 packed eight to an int32), torch.float8_e5m2 (291),
torch.float8_e4m3fn (292) or torch_npu.hifloat8 (290, uint8 codes). Integers round half to even and saturate;
float8 values round to nearest even without saturation; all from float32. rstd ([*, 1], float32) is returned
when x requires grad, an empty tensor otherwise (as the card skips writing it).
"""

import torch

from torch_npu._c_children import DTypeNumber
from torch_npu.ops._common import check
from torch_npu.ops.norms import rms_statistics
from torch_npu.ops.quant import quantised
from torch_npu.ops.registration import npu_op
from torch_npu.utils import hifloat8

__all__ = []

_OP = "npu_rms_norm_quant_v2"
_FLOAT8 = {291: torch.float8_e5m2, 292: torch.float8_e4m3fn}
_INTEGER = (None, 1, 16, torch.int8, torch.quint4x2)


def _check_dst(dst_dtype):
    dst = int(dst_dtype) if isinstance(dst_dtype, int) else dst_dtype
    known = dst in _INTEGER or dst in _FLOAT8 or dst == int(DTypeNumber.hifloat8)
    check(known, _OP, f"dst_dtype must be torch.int8, torch.quint4x2, torch.float8_e5m2, torch.float8_e4m3fn or torch_npu.hifloat8, got {dst_dtype}")  # fmt: skip
    return dst


def _rstd(x, rstd):
    return rstd if x.requires_grad else x.new_empty((0,), dtype=torch.float32)


def _fake(x, gamma, scale, *, offset=None, beta=None, epsilon=1e-6, div_mode=True, dst_dtype=None):
    dst = _check_dst(dst_dtype)
    if dst in (16, torch.quint4x2):
        y = x.new_empty(*x.shape[:-1], x.shape[-1] // 8, dtype=torch.int32)
    else:
        y = x.new_empty(x.shape, dtype=_FLOAT8.get(dst, torch.uint8 if dst == int(DTypeNumber.hifloat8) else torch.int8))  # fmt: skip
    return y, _rstd(x, x.new_empty(*x.shape[:-1], 1, dtype=torch.float32))


@npu_op(
    "npu_rms_norm_quant_v2(Tensor x, Tensor gamma, Tensor scale, *, Tensor? offset=None, Tensor? beta=None, "
    "float epsilon=1e-06, bool div_mode=True, int? dst_dtype=None) -> (Tensor, Tensor)",
    fake=_fake,
)
def npu_rms_norm_quant_v2(x, gamma, scale, *, offset=None, beta=None, epsilon=1e-6, div_mode=True, dst_dtype=None):
    """(y quantised, rstd)."""
    dst = _check_dst(dst_dtype)
    check(gamma.numel() == x.shape[-1], _OP, f"gamma must hold one value per element of x's last dim ({x.shape[-1]}), got {tuple(gamma.shape)}")  # fmt: skip
    gamma = gamma.reshape(-1)
    xf, rstd = rms_statistics(x, gamma, epsilon, _OP)
    y = xf * rstd * gamma.float()
    if beta is not None:
        y = y + beta.reshape(-1).float()
    y = y / scale.float() if div_mode else y * scale.float()
    if offset is not None:
        y = y + offset.float()
    if dst in _FLOAT8:
        out = y.to(_FLOAT8[dst])
    elif dst == int(DTypeNumber.hifloat8):
        out = hifloat8.encode(y)
    else:
        out = quantised(y, dst, _OP, "dst_dtype")
    return out, _rstd(x, rstd)
