"""npu_quant_matmul_reduce_sum: batched A8W8 matmuls dequantised and summed over the batch (QuantMatmulReduceSum).

    out[m, n] = sum over b of (x1[b] @ x2[b])[m, n] * x1_scale[b, m] * x2_scale[n]

x1 [batch, m, k] and x2 [batch, k, n] int8 (x2 in NZ on the card; any format here), x1_scale float32
[batch, m], x2_scale bfloat16 [n]. Each integer product is exact; dequantisation and the sum over the batch
(in batch order) are float32; the result is bfloat16 [m, n].
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.quant import int_matmul
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_quant_matmul_reduce_sum"


def _check(x1, x2, x1_scale, x2_scale):
    check(x1_scale is not None and x2_scale is not None, _OP, "x1_scale and x2_scale are required")
    check(x1.dtype == torch.int8 and x2.dtype == torch.int8, _OP, f"x1 and x2 must be int8, got {x1.dtype}, {x2.dtype}")
    check(x1.dim() == 3 and x2.dim() == 3, _OP, f"x1 and x2 must be 3-D, got {tuple(x1.shape)} and {tuple(x2.shape)}")
    batch, m, k = x1.shape
    check(
        x2.shape[0] == batch and x2.shape[1] == k,
        _OP,
        f"x2 must be [batch={batch}, k={k}, n], got {tuple(x2.shape)}",
    )
    check(x1_scale.dtype == torch.float32, _OP, f"x1_scale must be float32, got {x1_scale.dtype}")
    check(x2_scale.dtype == torch.bfloat16, _OP, f"x2_scale must be bfloat16, got {x2_scale.dtype}")
    check(
        tuple(x1_scale.shape) == (batch, m),
        _OP,
        f"x1_scale must be [batch={batch}, m={m}], got {tuple(x1_scale.shape)}",
    )
    n = x2.shape[2]
    check(tuple(x2_scale.shape) == (n,), _OP, f"x2_scale must be [n={n}], got {tuple(x2_scale.shape)}")
    check(min(x1.numel(), x2.numel()) > 0, _OP, "x1 and x2 must not be empty")


def _fake(x1, x2, *, x1_scale=None, x2_scale=None):
    return x1.new_empty(x1.shape[1], x2.shape[2], dtype=torch.bfloat16)


@npu_op(
    "npu_quant_matmul_reduce_sum(Tensor x1, Tensor x2, *, Tensor? x1_scale=None, Tensor? x2_scale=None) -> Tensor",
    fake=_fake,
    api="aclnnQuantMatmulReduceSum",
)
def npu_quant_matmul_reduce_sum(x1, x2, *, x1_scale=None, x2_scale=None):
    _check(x1, x2, x1_scale, x2_scale)
    products = int_matmul(x1, x2)  # [batch, m, n], exact
    column = x2_scale.float().view(1, -1)
    out = torch.zeros(products.shape[1:], dtype=torch.float32, device=x1.device)
    for b in range(products.shape[0]):
        out += products[b] * x1_scale[b].view(-1, 1) * column
    return out.to(torch.bfloat16)
