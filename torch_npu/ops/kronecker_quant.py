"""npu_kronecker_quant: FlatQuant's Kronecker transform, then per-token int4 quantisation (FlatQuant).

    x'' = kronecker_p1 @ (x @ kronecker_p2)                     x [K, M, N], p1 [M, M], p2 [N, N]
    quant_scale[k] = max|x''[k]| * clip_ratio / 7               float32 [K]
    out = round(x'' / quant_scale), clamped to int4, packed eight to an int32 (first in the lowest nibble)

The products are computed in float32 from the float16 / bfloat16 inputs; rounding is half to even.
dst_dtype takes torch.int32 (the packed int4 output, the default); dst_type_max (0 or 6..12, the float4
group path) is accepted only as 0: the per-group float4_e2m1 output is not computed by vnpu.
"""

import torch

from torch_npu.ops._common import check, dtype_of
from torch_npu.ops.quant import INT4_RANGE, pack_int4
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_kronecker_quant"


def _check(x, p1, p2, clip_ratio, dst_dtype, dst_type_max):
    check(x.dtype in (torch.float16, torch.bfloat16), _OP, f"x must be float16 or bfloat16, got {x.dtype}")
    check(p1.dtype == x.dtype and p2.dtype == x.dtype, _OP, "x, kronecker_p1 and kronecker_p2 must have one dtype")
    check(x.dim() == 3, _OP, f"x must be [K, M, N], got {tuple(x.shape)}")
    k, m, n = x.shape
    check(tuple(p1.shape) == (m, m), _OP, f"kronecker_p1 must be [M, M] = [{m}, {m}], got {tuple(p1.shape)}")
    check(tuple(p2.shape) == (n, n), _OP, f"kronecker_p2 must be [N, N] = [{n}, {n}], got {tuple(p2.shape)}")
    check(n % 8 == 0, _OP, f"x's last dim N must be a multiple of 8, got {n}")
    ratio = 1.0 if clip_ratio is None else clip_ratio
    check(0 < ratio <= 1, _OP, f"clip_ratio must be in (0, 1], got {ratio}")
    check(
        dst_dtype is None or dtype_of(dst_dtype, _OP, "dst_dtype") == torch.int32, _OP, "dst_dtype must be torch.int32"
    )
    check(not dst_type_max, _OP, "dst_type_max selects the per-group float4_e2m1 output, which vnpu does not compute")
    return ratio


def _fake(x, kronecker_p1, kronecker_p2, clip_ratio=None, dst_dtype=None, dst_type_max=None):
    _check(x, kronecker_p1, kronecker_p2, clip_ratio, dst_dtype, dst_type_max)
    k, m, n = x.shape
    return x.new_empty(k, m, n // 8, dtype=torch.int32), x.new_empty(k, dtype=torch.float32)


@npu_op(
    "npu_kronecker_quant(Tensor x, Tensor kronecker_p1, Tensor kronecker_p2, float? clip_ratio=None, "
    "int? dst_dtype=None, float? dst_type_max=None) -> (Tensor out, Tensor quant_scale)",
    fake=_fake,
)
def npu_kronecker_quant(x, kronecker_p1, kronecker_p2, clip_ratio=None, dst_dtype=None, dst_type_max=None):
    """(out int32 [K, M, N/8], quant_scale float32 [K])."""
    ratio = _check(x, kronecker_p1, kronecker_p2, clip_ratio, dst_dtype, dst_type_max)
    transformed = kronecker_p1.float() @ (x.float() @ kronecker_p2.float())
    scale = transformed.abs().amax(dim=(1, 2)) * ratio / 7
    divided = torch.where(scale[:, None, None] > 0, transformed / scale[:, None, None], 0.0)  # an all-zero token: 0
    quantised = torch.round(divided).clamp(*INT4_RANGE)
    return pack_int4(quantised), scale
