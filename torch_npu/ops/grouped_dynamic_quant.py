"""Per-group dynamic quantisation of a token-major matrix whose rows are grouped by expert (the layouts a grouped
matmul's weight gradient contracts over M):

npu_grouped_dynamic_mx_quant(x [M, N], group_index): MX quantisation along M inside each group (blocks of 32 rows
that never cross a group boundary; a group's last block is padded with zeros) to float8_e5m2 / float8_e4m3fn.
mxscale is [M // 64 + E, N, 2]: each group's block scales in pairs, the groups one after another, the rows left
over zero.

npu_grouped_dynamic_block_quant(x [M, N] or [B, M, N], group_list): npu_dynamic_block_quant's block quantisation
inside each group (row blocks restart at each group), to float8 or hifloat8; scale is
[.., M // row_block_size + E, ceil(N / col_block_size)], each group's row blocks one after another, the rest zero.

group_index / group_list hold cumulative row ends (non-decreasing, the last equal to M).
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dynamic_quant import block_quantised
from torch_npu.ops.mx_quant import mx_quantised
from torch_npu.ops.registration import npu_op

__all__ = []

_FP8 = {23: torch.float8_e5m2, 291: torch.float8_e5m2, 24: torch.float8_e4m3fn, 292: torch.float8_e4m3fn}


def _ends(groups, m, op, name):
    check(groups.dim() == 1, op, f"{name} must be 1-D, got {tuple(groups.shape)}")
    ends = [int(e) for e in groups.tolist()]
    check(
        all(0 <= a <= b for a, b in zip([0, *ends], ends)) and (not ends or ends[-1] == m),
        op,
        f"{name} must be non-decreasing cumulative row ends ending at M = {m}, got {ends}",
    )
    return list(zip([0, *ends], ends))


def _mx_fake(x, group_index, *, round_mode="rint", dst_type=23, blocksize=32, scale_alg=0, dst_type_max=0.0):
    m, n = x.shape
    y = x.new_empty(x.shape, dtype=_FP8.get(int(dst_type), torch.float8_e5m2))
    return y, x.new_empty(m // 64 + group_index.shape[0], n, 2, dtype=torch.uint8)


@npu_op(
    'npu_grouped_dynamic_mx_quant(Tensor x, Tensor group_index, *, str round_mode="rint", int dst_type=23, '
    "int blocksize=32, int? scale_alg=0, float? dst_type_max=0.0) -> (Tensor, Tensor)",
    fake=_mx_fake,
)
def npu_grouped_dynamic_mx_quant(x, group_index, *, round_mode="rint", dst_type=23, blocksize=32, scale_alg=0,
                                 dst_type_max=0.0):  # fmt: skip
    """(y, mxscale)."""
    op = "npu_grouped_dynamic_mx_quant"
    check(x.dim() == 2, op, f"X dimNum should be 2, got {x.dim()}")
    check(blocksize == 32, op, f"Parameter blocksize must be 32, got {blocksize}")
    check(int(dst_type) in _FP8, op, f"dst_type must be torch.float8_e5m2 or torch.float8_e4m3fn, got {dst_type}")
    m, n = x.shape
    y = x.new_empty(x.shape, dtype=_FP8[int(dst_type)])
    mxscale = x.new_zeros(m // 64 + group_index.shape[0], n, 2, dtype=torch.uint8)
    row = 0
    for start, end in _ends(group_index, m, op, "group_index"):
        if end == start:
            continue
        part, scales = mx_quantised(x[start:end], 0, round_mode, dst_type, 32, scale_alg or 0, dst_type_max or 0.0, op=op)  # fmt: skip
        y[start:end] = part
        mxscale[row : row + scales.shape[0]] = scales
        row += scales.shape[0]
    return y, mxscale


def _block_fake(x, group_list, *, min_scale=0.0, round_mode="rint", dst_type=291, row_block_size=1,
                col_block_size=128, group_list_type=0, dst_type_max=0.0):  # fmt: skip
    dtype = torch.uint8 if int(dst_type) == 290 else _FP8.get(int(dst_type), torch.float8_e5m2)
    rows, cols = x.shape[-2] // row_block_size + group_list.shape[0], -(-x.shape[-1] // col_block_size)
    return x.new_empty(x.shape, dtype=dtype), x.new_empty(*x.shape[:-2], rows, cols, dtype=torch.float32)


@npu_op(
    'npu_grouped_dynamic_block_quant(Tensor x, Tensor group_list, *, float min_scale=0.0, str round_mode="rint", '
    "int dst_type=291, int row_block_size=1, int col_block_size=128, int group_list_type=0, float dst_type_max=0.0) "
    "-> (Tensor, Tensor)",
    fake=_block_fake,
)
def npu_grouped_dynamic_block_quant(x, group_list, *, min_scale=0.0, round_mode="rint", dst_type=291,
                                    row_block_size=1, col_block_size=128, group_list_type=0,
                                    dst_type_max=0.0):  # fmt: skip
    """(y, scale)."""
    op = "npu_grouped_dynamic_block_quant"
    check(row_block_size != 0, op, "row_block_size cannot be zero.")
    check(x.dim() in (2, 3), op, "x must be 2 or 3 dimensional.")
    check(group_list_type == 0, op, f"group_list_type only supports value 0, got {group_list_type}")
    check(int(dst_type) in (290, 291, 292), op, f"dst_type must be 290 (hifloat8), 291 (float8_e5m2) or 292 (float8_e4m3fn), got {dst_type}")  # fmt: skip
    y_parts, scale_parts = [], []
    for start, end in _ends(group_list, x.shape[-2], op, "group_list"):
        if end == start:
            continue
        part, scale = block_quantised(x[..., start:end, :], min_scale, round_mode, int(dst_type), row_block_size,
                                      col_block_size, dst_type_max, op)  # fmt: skip
        y_parts.append(part)
        scale_parts.append(scale)
    out_y, out_scale = _block_fake(x, group_list, dst_type=dst_type, row_block_size=row_block_size, col_block_size=col_block_size)  # fmt: skip
    out_scale.zero_()
    if y_parts:
        out_y.copy_(torch.cat(y_parts, -2))
        written = torch.cat(scale_parts, -2)
        out_scale[..., : written.shape[-2], :] = written
    return out_y, out_scale
