"""npu_rotate_quant: a block rotation of x, an optional clamp, then quantisation (RotateQuant).

Y = x split into blocks of k along the last dim, each block @ rotation ([k, k], or [n / k, k, k]: one matrix per
block), accumulated in float32 and rounded to x's dtype. With alpha in (0, 1), each run of 32 values of Y is clamped
to +-alpha * its max |value|. Then, by dst_dtype: int8 (the default) or torch.quint4x2 (int4 packed eight to an
int32) take the symmetric per-row dynamic quantisation (scale float32 [rows]); float8_e5m2, float8_e4m3fn and
float4_e2m1 take MX quantisation along axis in blocks of 32 (scale e8m0 bytes, npu_dynamic_mx_quant's layout).
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dynamic_quant import symmetric_dynamic
from torch_npu.ops.mx_quant import is_mx_type, mx_outputs_fake, mx_quantised
from torch_npu.ops.quant import packs_int4
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_rotate_quant"
_CLAMP_GROUP = 32


def _rotated(x, rotation):
    check(x.dim() >= 2, _OP, f"x must have at least 2 dims, got {tuple(x.shape)}")
    k = rotation.shape[-1]
    check(rotation.dim() in (2, 3) and rotation.shape[-2] == k, _OP,
          f"rotation must be [k, k] or [blocks, k, k], got {tuple(rotation.shape)}")  # fmt: skip
    check(x.shape[-1] % k == 0, _OP, f"x's last dim {x.shape[-1]} must be a multiple of rotation's size {k}")
    blocks = x.float().reshape(-1, x.shape[-1] // k, k)
    if rotation.dim() == 3:
        check(rotation.shape[0] == blocks.shape[1], _OP,
              f"a 3-D rotation must hold one matrix per block ({blocks.shape[1]}), got {rotation.shape[0]}")  # fmt: skip
        y = torch.einsum("rbi,bij->rbj", blocks, rotation.float())
    else:
        y = blocks @ rotation.float()
    return y.reshape(x.shape).to(x.dtype)


def _clamped(y, alpha):
    if alpha is None or alpha.numel() == 0:
        return y
    a = float(alpha.reshape(-1)[0])
    if not 0.0 < a < 1.0:
        return y
    check(y.numel() % _CLAMP_GROUP == 0, _OP, f"the clamp works on groups of {_CLAMP_GROUP} values")
    groups = y.float().reshape(-1, _CLAMP_GROUP)
    limit = a * groups.abs().amax(-1, keepdim=True)
    return torch.maximum(torch.minimum(groups, limit), -limit).reshape(y.shape).to(y.dtype)


def _check_options(x, dst_dtype, axis, transpose_y):
    check(not transpose_y, _OP, "In the current CANN version, for aclnnRotateQuant, the parameter transpose_y only "
          "supports False. Please set transpose_y=False.")  # fmt: skip
    check(-x.dim() <= axis < x.dim(), _OP, "Param (axis) is out of input dimension range")
    if not is_mx_type(dst_dtype):
        check(x.dim() == 2, _OP, f"x must be 2-D for int8 / int4 outputs, got {tuple(x.shape)}")
        packs_int4(dst_dtype, _OP, "dst_dtype")


def _fake(x, rotation, *, alpha=None, dst_dtype=None, axis=-1, round_mode="rint", scale_alg=0, dst_type_max=0.0,
          transpose_y=False):  # fmt: skip
    _check_options(x, dst_dtype, axis, transpose_y)
    if is_mx_type(dst_dtype):
        return mx_outputs_fake(x, axis=axis, round_mode=round_mode, dst_type=dst_dtype, scale_alg=scale_alg,
                       dst_type_max=dst_type_max)  # fmt: skip
    packed = packs_int4(dst_dtype, _OP, "dst_dtype")
    y = x.new_empty(x.shape[0], x.shape[1] // 8 if packed else x.shape[1], dtype=torch.int32 if packed else torch.int8)
    return y, x.new_empty(x.shape[0], dtype=torch.float32)


@npu_op(
    "npu_rotate_quant(Tensor x, Tensor rotation, *, Tensor? alpha=None, int? dst_dtype=None, int? axis=-1, "
    'str? round_mode="rint", int? scale_alg=0, float? dst_type_max=0.0, bool? transpose_y=False) -> (Tensor, Tensor)',
    fake=_fake,
)
def npu_rotate_quant(x, rotation, *, alpha=None, dst_dtype=None, axis=-1, round_mode="rint", scale_alg=0,
                     dst_type_max=0.0, transpose_y=False):  # fmt: skip
    """(y, scale): the rotated, clamped x quantised per row (int8 / int4) or in MX blocks (float8 / float4)."""
    axis = -1 if axis is None else axis
    _check_options(x, dst_dtype, axis, bool(transpose_y))
    y = _clamped(_rotated(x, rotation), alpha)
    if is_mx_type(dst_dtype):
        return mx_quantised(y, axis, round_mode or "rint", int(dst_dtype), 32, scale_alg or 0, dst_type_max or 0.0,
                            op=_OP)  # fmt: skip
    return symmetric_dynamic(y.float(), dst_dtype, _OP, "dst_dtype")
