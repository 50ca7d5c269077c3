"""npu_grouped_matmul_swiglu_quant (+ _v2): the A8W8 MoE up-projection fused with its activation and the next
layer's quantisation (GroupedMatmulSwigluQuant).

For expert e's rows of x (group_list: cumulative row ends, or counts with the v2 group_list_type 1):
    y = float(x_e @ w_e) * weight_scale[e] * x_scale[rows]          (int32 product, then float32)
    a = y_left * sigmoid(y_left) * y_right                           (the halves of y's last dim)
    output = round(a * 127 / max|a|) as int8, output_scale = max|a| / 127, per row (round half to even)
Rows after the last group are not computed by the card; vnpu returns them as zeros. The third output of the
first version is the quantisation offset, 0 for this symmetric scheme.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.quant import group_row_counts, int_matmul
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_grouped_matmul_swiglu_quant"
_OP_V2 = "npu_grouped_matmul_swiglu_quant_v2"


def _compute(op, x, weight, weight_scale, x_scale, group_list, group_list_type):
    check(
        x.dtype == torch.int8 and weight.dtype == torch.int8,
        op,
        f"x and weight must be int8, got {x.dtype}, " f"{weight.dtype}",
    )
    check(
        x.dim() == 2 and weight.dim() == 3,
        op,
        f"x must be [M, K] and weight [E, K, N], got {tuple(x.shape)} " f"and {tuple(weight.shape)}",
    )
    experts, k, n = weight.shape
    check(x.shape[1] == k, op, f"x's K {x.shape[1]} does not match weight's {k}")
    check(n % 2 == 0, op, f"weight's N must be even (SwiGLU halves it), got {n}")
    check(
        tuple(weight_scale.shape) == (experts, n),
        op,
        f"weight_scale must be [E={experts}, N={n}], got {tuple(weight_scale.shape)}",
    )
    check(tuple(x_scale.shape) == (x.shape[0],), op, f"x_scale must be [M={x.shape[0]}], got {tuple(x_scale.shape)}")
    check(
        group_list.dim() == 1 and group_list.shape[0] == experts,
        op,
        f"group_list must hold one entry per expert ({experts}), got {tuple(group_list.shape)}",
    )
    counts = group_row_counts(group_list, group_list_type, x.shape[0], op)
    check(min(counts, default=0) >= 0, op, f"group_list must describe non-negative group sizes, got {counts}")
    output = torch.zeros(x.shape[0], n // 2, dtype=torch.int8, device=x.device)
    scale = torch.zeros(x.shape[0], dtype=torch.float32, device=x.device)
    start = 0
    for e, count in enumerate(counts):
        if count:
            rows = slice(start, start + count)
            y = int_matmul(x[rows], weight[e]) * weight_scale[e].float() * x_scale[rows].float().view(-1, 1)
            left, right = y.chunk(2, dim=-1)
            act = left * torch.sigmoid(left) * right
            factor = 127 / act.abs().max(dim=-1).values
            output[rows] = torch.round(act * factor.view(-1, 1)).to(torch.int8)
            scale[rows] = 1 / factor
        start += count
    return output, scale


def _fake(x, weight, group_list, weight_scale, x_scale, *, bias=None, offset=None):
    m, n = x.shape[0], weight.shape[-1]
    rows = x.new_empty(m, dtype=torch.float32)
    return x.new_empty(m, n // 2, dtype=torch.int8), rows, torch.empty_like(rows)


@npu_op(
    "npu_grouped_matmul_swiglu_quant(Tensor x, Tensor weight, Tensor group_list, Tensor weight_scale, "
    "Tensor x_scale, *, Tensor? bias=None, Tensor? offset=None) -> (Tensor, Tensor, Tensor)",
    fake=_fake,
    api="aclnnGroupedMatmulSwigluQuant",
)
def npu_grouped_matmul_swiglu_quant(x, weight, group_list, weight_scale, x_scale, *, bias=None, offset=None):
    check(bias is None and offset is None, _OP, "bias and offset are reserved and must be None")
    output, scale = _compute(_OP, x, weight, weight_scale, x_scale, group_list, 0)
    return output, scale, torch.zeros_like(scale)


def _fake_v2(x, weight, weight_scale, x_scale, group_list, **kwargs):
    m, n = x.shape[0], weight[0].shape[-1]
    return x.new_empty(m, n // 2, dtype=torch.int8), x.new_empty(m, dtype=torch.float32)


@npu_op(
    "npu_grouped_matmul_swiglu_quant_v2(Tensor x, Tensor[] weight, Tensor[] weight_scale, Tensor x_scale, "
    "Tensor group_list, *, Tensor? smooth_scale=None, Tensor[]? weight_assist_matrix=None, Tensor? bias=None, "
    "int? dequant_mode=0, int? dequant_dtype=0, int? quant_mode=0, int? quant_dtype=1, int? group_list_type=0, "
    "int[]? tuning_config=None, int? x_dtype=None, int? weight_dtype=None, int? weight_scale_dtype=None, "
    "int? x_scale_dtype=None) -> (Tensor, Tensor)",
    fake=_fake_v2,
    api="aclnnGroupedMatmulSwigluQuantV2",
)
def npu_grouped_matmul_swiglu_quant_v2(
    x,
    weight,
    weight_scale,
    x_scale,
    group_list,
    *,
    smooth_scale=None,
    weight_assist_matrix=None,
    bias=None,
    dequant_mode=0,
    dequant_dtype=0,
    quant_mode=0,
    quant_dtype=1,
    group_list_type=0,
    tuning_config=None,
    x_dtype=None,
    weight_dtype=None,
    weight_scale_dtype=None,
    x_scale_dtype=None,
):
    check(
        len(weight) == 1 and len(weight_scale) == 1,
        _OP_V2,
        f"A8W8 takes weight and weight_scale as one tensor each, got {len(weight)} and {len(weight_scale)}",
    )
    check(
        smooth_scale is None and weight_assist_matrix is None and bias is None,
        _OP_V2,
        "smooth_scale, weight_assist_matrix and bias belong to the MX formats, which vnpu does not support",
    )
    check(
        (dequant_mode, quant_mode) == (0, 0),
        _OP_V2,
        f"vnpu supports the A8W8 per-channel / per-token scheme (dequant_mode 0, quant_mode 0), got "
        f"{dequant_mode} and {quant_mode}",
    )
    check(group_list_type in (0, 1), _OP_V2, f"group_list_type must be 0 (cumsum) or 1 (count), got {group_list_type}")
    return _compute(_OP_V2, x, weight[0], weight_scale[0], x_scale, group_list, group_list_type)
