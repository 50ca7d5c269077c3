"""op-plugin's ATB LinearOperation as torch_npu exposes it (torch.ops.atb._npu_matmul_add_fp32, also
torch_npu._npu_matmul_add_fp32): a weight gradient accumulated into a float32 buffer in place, as Megatron-style
frameworks keep the main gradients of 16-bit weights."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []


@npu_op("atb::_npu_matmul_add_fp32(Tensor x, Tensor weight, Tensor(a!) C) -> ()")
def _npu_matmul_add_fp32(x, weight, C):
    """C += xᵀ · weight, accumulated in float32 (x [k, m] and weight [k, n] in 16 bits, C [m, n] float32): the
    gradient accumulation of a weight kept in float32."""
    op = "_npu_matmul_add_fp32"
    check(x.dim() == 2 and weight.dim() == 2, op, "x and weight must be 2-D")
    check(x.shape[0] == weight.shape[0], op, f"x {tuple(x.shape)} and weight {tuple(weight.shape)} differ in k")
    check(C.dtype == torch.float32, op, f"C must be float32, got {C.dtype}")
    check(C.shape == (x.shape[1], weight.shape[1]), op, f"C must be [{x.shape[1]}, {weight.shape[1]}], got {tuple(C.shape)}")  # fmt: skip
    C.add_(torch.mm(x.t().float(), weight.float()))
