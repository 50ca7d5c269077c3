"""npu_all_gather_quant_mm / npu_quant_mm_reduce_scatter: npu_all_gather_base_mm and npu_mm_reduce_scatter_base
with quantised operands dequantised by their scales (the quantisation is implied by the scales' shapes):

    float x1 / x2 (no scales):        AllGather(x1) @ x2 + bias
    per tensor [1], per token [m, 1] / per channel [1, n] (int8, float8):
                                      (x1_scale * x2_scale) * (AllGather(x1) @ x2 + bias)
    per block (x1_scale [ceil(m / 128), ceil(k / 128)], x2_scale [ceil(k / 128), ceil(n / 128)], float8):
                                      sum over k blocks of x1_pr @ x2_rq * x1_scale_pr * x2_scale_rq

npu_quant_mm_reduce_scatter reduce-scatters (sum) the dequantised product along m. The per-token / per-block
x1 scales are gathered with x1. Products accumulate in float32; y is y_dtype (x1's dtype for float inputs).
Returns (y, gather_out, amax) / (y, amax); amax (amax_output) is empty: only amax_output=False exists on the
card today. Not computed: MX scales (float8_e8m0), quant_scale, block_size other than 0, int4 / HiFloat8 /
FP4 operands named by x1_dtype / x2_dtype.
"""

import torch
import torch.distributed as dist

from torch_npu.ops._common import check, dtype_of
from torch_npu.ops.matmul_collectives import process_group
from torch_npu.ops.registration import npu_op

__all__ = []

_BLOCK = 128
_COMMON = "Tensor? bias=None, Tensor? x1_scale=None, Tensor? x2_scale=None, Tensor? quant_scale=None, int block_size=0"
_DTYPES = "int? y_dtype=None, int? x1_dtype=None, int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None, str? comm_mode=None"  # fmt: skip


def _checks(x1, x2, x1_scale, x2_scale, quant_scale, block_size, comm_turn, amax_output, x1_dtype, x2_dtype, op):
    check(x1.dim() == 2 and x2.dim() == 2, op, f"self and x2 must be 2-D, got {tuple(x1.shape)} and {tuple(x2.shape)}")  # fmt: skip
    check(x1.shape[1] == x2.shape[0], op, f"k of self ({x1.shape[1]}) and x2 ({x2.shape[0]}) must be equal")
    check((x1_scale is None) == (x2_scale is None), op, "x1_scale and x2_scale go together")
    check(x1_scale is not None or not (x1.dtype == torch.int8 or x1.element_size() == 1), op, "quantised self and x2 need x1_scale and x2_scale")  # fmt: skip
    for name, value in (("quant_scale", quant_scale), ("x1_dtype", x1_dtype), ("x2_dtype", x2_dtype)):
        check(value is None, op, f"{name} is not computed by vnpu")
    check(block_size == 0 and comm_turn == 0, op, "block_size and comm_turn must be 0")
    check(not amax_output, op, "amax_output must be False (the only value torch_npu supports)")
    for scale in (x1_scale, x2_scale):
        if scale is not None:
            check(scale.dtype in (torch.float32, torch.int64), op, f"scales must be float32 (MX float8_e8m0 scales are not computed by vnpu), got {scale.dtype}")  # fmt: skip


def _per_block(a, b, sa, sb):
    m, k = a.shape
    n = b.shape[1]
    ea = sa.float().repeat_interleave(_BLOCK, 0).repeat_interleave(_BLOCK, 1)[:m, :k]
    eb = sb.float().repeat_interleave(_BLOCK, 0).repeat_interleave(_BLOCK, 1)[:k, :n]
    out = a.new_zeros(m, n, dtype=torch.float32)
    for start in range(0, k, _BLOCK):  # each k block's partial product scaled by its own block scales
        part = a[:, start : start + _BLOCK].float() @ b[start : start + _BLOCK].float()
        out += part * ea[:, start : start + 1] * eb[start : start + 1, :]
    return out


def _dequantised_product(a, b, sa, sb, bias, op):
    out_rows = lambda t: t.float().reshape(-1, 1) if t.numel() > 1 else t.float()  # noqa: E731
    out_cols = lambda t: t.float().reshape(1, -1) if t.numel() > 1 else t.float()  # noqa: E731
    if sa is not None and sa.dim() == 2 and sb.dim() == 2 and sa.shape[1] > 1 and sb.shape[0] > 1:
        check(bias is None, op, "bias must be None with per-block scales")
        return _per_block(a, b, sa, sb)
    out = a.float() @ b.float()
    if bias is not None:
        out = out + bias.float()
    return out if sa is None else out * out_rows(sa) * out_cols(sb)


def _out_dtype(x1, y_dtype, op):
    if x1.dtype in (torch.float16, torch.bfloat16, torch.float32):
        check(y_dtype is None or dtype_of(y_dtype, op, "y_dtype") == x1.dtype, op, "y_dtype must be self's dtype for float inputs")  # fmt: skip
        return x1.dtype
    check(y_dtype is not None, op, "quantised inputs need y_dtype (torch.float16, torch.bfloat16 or torch.float32)")
    return dtype_of(y_dtype, op, "y_dtype")


def _group(hcom, world_size, op):
    group = process_group(hcom, op)
    check(world_size == group.size(), op, f"world_size={world_size} does not match the {group.size()} ranks of the group")  # fmt: skip
    return group


def _gathered(t, world_size, group):
    out = t.new_empty(t.shape[0] * world_size, *t.shape[1:])
    dist.all_gather_into_tensor(out, t.contiguous(), group=group)
    return out


@npu_op(
    f"npu_all_gather_quant_mm(Tensor self, Tensor x2, str hcom, int world_size, *, {_COMMON}, int gather_index=0, "
    "bool gather_output=True, int comm_turn=0, int[]? group_sizes=None, bool amax_output=False, "
    f"{_DTYPES}) -> (Tensor, Tensor, Tensor)",
    fake=lambda x1, x2, hcom, world_size, *, gather_output=True, y_dtype=None, **kw: (
        x1.new_empty(x1.shape[0] * world_size, x2.shape[1], dtype=_out_dtype(x1, y_dtype, "npu_all_gather_quant_mm")),
        x1.new_empty(x1.shape[0] * world_size, x1.shape[1]) if gather_output else x1.new_empty(0),
        x1.new_empty(0, dtype=torch.float32),
    ),
)
def npu_all_gather_quant_mm(x1, x2, hcom, world_size, *, bias=None, x1_scale=None, x2_scale=None, quant_scale=None,
                            block_size=0, gather_index=0, gather_output=True, comm_turn=0, group_sizes=None,
                            amax_output=False, y_dtype=None, x1_dtype=None, x2_dtype=None, x1_scale_dtype=None,
                            x2_scale_dtype=None, comm_mode=None):  # fmt: skip
    """(y [m * world_size, n], gather_out or empty, amax (empty))."""
    op = "npu_all_gather_quant_mm"
    _checks(x1, x2, x1_scale, x2_scale, quant_scale, block_size, comm_turn, amax_output, x1_dtype, x2_dtype, op)
    check(gather_index == 0, op, f"gather_index must be 0 (gather self), got {gather_index}")
    dtype = _out_dtype(x1, y_dtype, op)
    group = _group(hcom, world_size, op)
    gathered = _gathered(x1, world_size, group)
    scale = x1_scale if x1_scale is None or x1_scale.numel() == 1 else _gathered(x1_scale, world_size, group)
    out = _dequantised_product(gathered, x2, scale, x2_scale, bias, op).to(dtype)
    return out, gathered if gather_output else x1.new_empty(0), x1.new_empty(0, dtype=torch.float32)


@npu_op(
    f"npu_quant_mm_reduce_scatter(Tensor self, Tensor x2, str hcom, int world_size, *, str reduce_op='sum', {_COMMON}, "
    f"int comm_turn=0, int[]? group_sizes=None, bool amax_output=False, {_DTYPES}) -> (Tensor, Tensor)",
    fake=lambda x1, x2, hcom, world_size, *, y_dtype=None, **kw: (
        x1.new_empty(
            x1.shape[0] // world_size, x2.shape[1], dtype=_out_dtype(x1, y_dtype, "npu_quant_mm_reduce_scatter")
        ),
        x1.new_empty(0, dtype=torch.float32),
    ),
)
def npu_quant_mm_reduce_scatter(x1, x2, hcom, world_size, *, reduce_op="sum", bias=None, x1_scale=None,
                                x2_scale=None, quant_scale=None, block_size=0, comm_turn=0, group_sizes=None,
                                amax_output=False, y_dtype=None, x1_dtype=None, x2_dtype=None, x1_scale_dtype=None,
                                x2_scale_dtype=None, comm_mode=None):  # fmt: skip
    """(y [m / world_size, n], amax (empty))."""
    op = "npu_quant_mm_reduce_scatter"
    _checks(x1, x2, x1_scale, x2_scale, quant_scale, block_size, comm_turn, amax_output, x1_dtype, x2_dtype, op)
    check(reduce_op == "sum", op, f"reduce_op must be 'sum', got {reduce_op!r}")
    check(x1.shape[0] % world_size == 0, op, f"m={x1.shape[0]} must be divisible by world_size={world_size}")
    dtype = _out_dtype(x1, y_dtype, op)
    group = _group(hcom, world_size, op)
    product = _dequantised_product(x1, x2, x1_scale, x2_scale, bias, op).contiguous()
    out = product.new_empty(x1.shape[0] // world_size, x2.shape[1])
    dist.reduce_scatter_tensor(out, product, group=group)
    return out.to(dtype), x1.new_empty(0, dtype=torch.float32)
