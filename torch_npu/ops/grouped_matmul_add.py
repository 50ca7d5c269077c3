"""npu_grouped_matmul_add(_): grouped matmuls split along K, accumulated into a float32 output — the weight
gradient of MoE experts (MindSpeed's gmm weight-gradient accumulation): y[g] += x[k_g].T @ weight[k_g], where
k_g are the rows of group g of x and weight (group_list: cumulative ends, or counts with group_list_type 1).
Products are computed in float32."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.functionalization import functionalized_by
from torch_npu.ops.quant import group_row_counts
from torch_npu.ops.registration import npu_op

__all__ = []

_ARGS = (
    "Tensor x, Tensor weight, Tensor group_list, *, bool transpose_x=True, bool transpose_weight=False, "
    "int group_type=2, int? group_list_type=0"
)
_HALF = (torch.float16, torch.bfloat16)


def _grouped_products(y, x, weight, group_list, transpose_x, transpose_weight, group_type, group_list_type, op):
    check(group_type == 2, op, f"group_type must be 2 (groups along K), got {group_type}")
    check(transpose_x and not transpose_weight, op, "only transpose_x=True and transpose_weight=False are supported")
    check(
        x.dim() == 2 and weight.dim() == 2 and x.shape[0] == weight.shape[0],
        op,
        "x and weight must be [K, M] and [K, N]",
    )
    sizes = group_row_counts(group_list, group_list_type or 0, x.shape[0], op)
    m, n = x.shape[1], weight.shape[1]
    check(
        y.numel() == len(sizes) * m * n,
        op,
        f"self must hold {len(sizes)} x [{m}, {n}] float32 results, got {tuple(y.shape)}",
    )
    blocks = []
    start = 0
    for size in sizes:
        blocks.append(x[start : start + size].float().T @ weight[start : start + size].float())
        start += size
    return torch.stack(blocks).reshape(y.shape)


@npu_op(
    f"npu_grouped_matmul_add(Tensor self, {_ARGS}) -> Tensor",
    dtypes={"self": (torch.float32,), "x": _HALF, "weight": _HALF},
    api="aclnnGroupedMatmulAdd",
)
def npu_grouped_matmul_add(
    y, x, weight, group_list, *, transpose_x=True, transpose_weight=False, group_type=2, group_list_type=0
):
    """self + the grouped products (a new tensor)."""
    products = _grouped_products(
        y, x, weight, group_list, transpose_x, transpose_weight, group_type, group_list_type, "npu_grouped_matmul_add"
    )
    return y + products


@npu_op(
    f"npu_grouped_matmul_add_(Tensor(a!) self, {_ARGS}) -> Tensor(a!)",
    dtypes={"self": (torch.float32,), "x": _HALF, "weight": _HALF},
    api="aclnnGroupedMatmulAdd",
)
def npu_grouped_matmul_add_(
    y, x, weight, group_list, *, transpose_x=True, transpose_weight=False, group_type=2, group_list_type=0
):
    """The grouped products added into self in place."""
    products = _grouped_products(
        y, x, weight, group_list, transpose_x, transpose_weight, group_type, group_list_type, "npu_grouped_matmul_add_"
    )
    return y.add_(products)


functionalized_by("npu_grouped_matmul_add_", "npu_grouped_matmul_add")
