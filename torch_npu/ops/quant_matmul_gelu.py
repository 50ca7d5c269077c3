"""npu_quant_matmul_gelu: an A8W8 (int8) or A4W4 (int4 packed eight to an int32) matmul dequantised with a
per-token x1_scale [m] and a per-channel (or per-tensor) x2_scale [n] / [1], plus bias, then GELU (erf or
tanh). The integer product is exact; the rest is float32, returned in float16 — bfloat16 when x2_scale is
bfloat16."""

import math

import torch

from torch_npu.ops._common import check
from torch_npu.ops.quant import int8_operands, int_matmul
from torch_npu.ops.registration import npu_op

__all__ = []

_APPROXIMATIONS = ("gelu_erf", "gelu_tanh")


def _fake(x1, x2, x1_scale, x2_scale, *, bias=None, approximate="gelu_erf"):
    n = x2.shape[-1] * (8 if x2.dtype == torch.int32 else 1)
    dtype = torch.bfloat16 if x2_scale.dtype == torch.bfloat16 else torch.float16
    return x1.new_empty(*x1.shape[:-1], n, dtype=dtype)


@npu_op(
    "npu_quant_matmul_gelu(Tensor x1, Tensor x2, Tensor x1_scale, Tensor x2_scale, *, Tensor? bias=None, "
    "str? approximate='gelu_erf') -> Tensor",
    fake=_fake,
    api="aclnnQuantMatmulGelu",
)
def npu_quant_matmul_gelu(x1, x2, x1_scale, x2_scale, *, bias=None, approximate="gelu_erf"):
    """gelu((x1 @ x2) * x1_scale[:, None] * x2_scale[None, :] + bias) (see the module doc)."""
    op = "npu_quant_matmul_gelu"
    check(approximate in _APPROXIMATIONS, op, f"approximate must be 'gelu_erf' or 'gelu_tanh', got {approximate!r}")
    a, b = int8_operands(x1, x2, op)
    check(a.shape[-1] == b.shape[-2], op, f"x1 {tuple(a.shape)} and x2 {tuple(b.shape)} do not multiply")
    value = int_matmul(a, b).float() * x1_scale.float().reshape(-1, 1) * x2_scale.float().reshape(1, -1)
    if bias is not None:
        value = value + bias.float().reshape(1, -1)
    if approximate == "gelu_tanh":
        value = 0.5 * value * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (value + 0.044715 * value.pow(3))))
    else:
        value = torch.nn.functional.gelu(value)
    return value.to(torch.bfloat16 if x2_scale.dtype == torch.bfloat16 else torch.float16)
