"""npu_quant_matmul_dequant / npu_quant_grouped_matmul_dequant: a float16 activation quantised to int8 inside the
operator, multiplied by an int8 weight with int32 accumulation, and dequantised back to float16
(QuantMatmulDequant, QuantGroupedMatmulDequant; the 310P's W8A8 linear layer).

    xs = x * smooth_scale (when given)
    quant_mode "pertoken":  x_scale = max |xs| per row / 127 (dynamic; unless x_scale is given per row)
    quant_mode "pertensor": x_scale given ([1])
    xq = round(xs * (1 / x_scale) + x_offset) saturated to int8           (half to even)
    y  = (xq @ W^T - x_offset * sum_k W) * x_scale * weight_scale + bias  (W [N, K] int8, weight_scale [N])

The grouped form takes W [G, N, K], weight_scale [G, N] and group_list (cumulative row ends): the rows of each
group are multiplied by their group's weight; rows after the last group are zero.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_KW = (
    "Tensor? bias=None, Tensor? x_scale=None, Tensor? x_offset=None, Tensor? smooth_scale=None, "
    "str? quant_mode='pertoken') -> Tensor"
)


def _quantised_x(x, x_scale, x_offset, smooth_scale, quant_mode, op):
    check(quant_mode in ("pertoken", "pertensor"), op, f"quant_mode must be 'pertoken' or 'pertensor', got {quant_mode!r}")  # fmt: skip
    check(x.dim() == 2, op, f"x must be [M, K], got {tuple(x.shape)}")
    xs = x.float() * (smooth_scale.float() if smooth_scale is not None else 1.0)
    if x_scale is None:
        check(quant_mode == "pertoken", op, "quant_mode 'pertensor' needs x_scale")
        scale = xs.abs().amax(-1) / 127.0
    else:
        scale = x_scale.float().reshape(-1)
    per_row = scale.reshape(-1, 1)
    offset = x_offset.float().reshape(-1, 1) if x_offset is not None else None
    value = xs * (1.0 / per_row) + (offset if offset is not None else 0.0)
    return torch.round(value).clamp(-128, 127), per_row, offset


def _dequantised(xq, per_row, offset, weight, weight_scale, bias):
    w = weight.float()
    acc = xq @ w.t()  # exact: int8 products summed in float32 stay integral below 2^24
    if offset is not None:
        acc = acc - offset * w.sum(-1)
    y = acc * per_row * weight_scale.float().reshape(-1)
    return y + bias.float() if bias is not None else y


@npu_op(f"npu_quant_matmul_dequant(Tensor x, Tensor quantized_weight, Tensor weight_scale, *, {_KW}")
def npu_quant_matmul_dequant(x, quantized_weight, weight_scale, *, bias=None, x_scale=None, x_offset=None,
                             smooth_scale=None, quant_mode="pertoken"):  # fmt: skip
    """[M, N] float16."""
    op = "npu_quant_matmul_dequant"
    check(quantized_weight.dtype == torch.int8 and quantized_weight.dim() == 2, op, f"quantized_weight must be int8 [N, K], got {quantized_weight.dtype} {tuple(quantized_weight.shape)}")  # fmt: skip
    check(quantized_weight.shape[1] == x.shape[-1], op, f"x's K {x.shape[-1]} differs from quantized_weight's {quantized_weight.shape[1]}")  # fmt: skip
    xq, per_row, offset = _quantised_x(x, x_scale, x_offset, smooth_scale, quant_mode, op)
    return _dequantised(xq, per_row, offset, quantized_weight, weight_scale, bias).to(torch.float16)


@npu_op(
    "npu_quant_grouped_matmul_dequant(Tensor x, Tensor quantized_weight, Tensor weight_scale, Tensor group_list, "
    f"*, {_KW}"
)
def npu_quant_grouped_matmul_dequant(x, quantized_weight, weight_scale, group_list, *, bias=None, x_scale=None,
                                     x_offset=None, smooth_scale=None, quant_mode="pertoken"):  # fmt: skip
    """[M, N] float16, each group of rows with its own weight."""
    op = "npu_quant_grouped_matmul_dequant"
    check(quantized_weight.dtype == torch.int8 and quantized_weight.dim() == 3, op, f"quantized_weight must be int8 [G, N, K], got {quantized_weight.dtype} {tuple(quantized_weight.shape)}")  # fmt: skip
    groups = quantized_weight.shape[0]
    ends = [int(e) for e in group_list.reshape(-1).tolist()]
    check(len(ends) == groups and all(a <= b for a, b in zip([0, *ends], ends)) and ends[-1] <= x.shape[0], op,
          f"group_list must hold {groups} non-decreasing cumulative row ends within {x.shape[0]}, got {ends}")  # fmt: skip
    xq, per_row, offset = _quantised_x(x, x_scale, x_offset, smooth_scale, quant_mode, op)
    per_row = per_row.expand(x.shape[0], 1)
    out = x.new_zeros(x.shape[0], quantized_weight.shape[1], dtype=torch.float32)
    for g, (start, end) in enumerate(zip([0, *ends], ends)):
        rows = slice(start, end)
        row_offset = offset if offset is None or offset.numel() == 1 else offset[rows]
        out[rows] = _dequantised(xq[rows], per_row[rows], row_offset, quantized_weight[g], weight_scale[g],
                                 bias[g] if bias is not None else None)  # fmt: skip
    return out.to(torch.float16)
