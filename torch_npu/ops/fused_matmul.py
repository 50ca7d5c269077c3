"""npu_fused_matmul: a matmul with the vector operation after it fused (FusedMatmul):

    y = OP(x1 @ x2 + bias, x3),  OP by fused_op_type: '' (none), 'add' (+ x3), 'mul' (* x3), 'gelu_erf',
                                  'gelu_tanh'

2-D operands; the product and OP are computed in float32 and rounded once to x1's dtype.
"""

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_fused_matmul"
_UNARY = {
    "": lambda y: y,
    "gelu_erf": F.gelu,
    "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
}
_BINARY = {"add": torch.add, "mul": torch.mul}


@npu_op("npu_fused_matmul(Tensor x1, Tensor x2, *, Tensor? bias=None, Tensor? x3=None, str fused_op_type='') -> Tensor")
def npu_fused_matmul(x1, x2, *, bias=None, x3=None, fused_op_type=""):
    """OP(x1 @ x2 + bias, x3)."""
    kinds = sorted([*_UNARY, *_BINARY])
    check(fused_op_type in kinds, _OP, f"fused_op_type must be one of {kinds}, got {fused_op_type!r}")
    check(x1.dim() == 2 and x2.dim() == 2, _OP, f"x1 and x2 must be 2-D, got {tuple(x1.shape)} and {tuple(x2.shape)}")
    check(x1.shape[1] == x2.shape[0], _OP, f"x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} cannot be multiplied")
    y = x1.float() @ x2.float()
    if bias is not None:
        y = y + bias.float()
    if fused_op_type in _BINARY:
        check(x3 is not None, _OP, f"fused_op_type {fused_op_type!r} needs x3")
        check(x3.shape == y.shape, _OP, f"x3 must have the product's shape {tuple(y.shape)}, got {tuple(x3.shape)}")
        y = _BINARY[fused_op_type](y, x3.float())
    else:
        y = _UNARY[fused_op_type](y)
    return y.to(x1.dtype)
