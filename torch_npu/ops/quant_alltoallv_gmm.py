"""npu_alltoallv_quant_gmm / npu_quant_gmm_alltoallv: npu_alltoallv_gmm / npu_gmm_alltoallv with 8-bit operands
(the same exchanges, row orders and per-expert matmuls; see alltoallv_gmm).

Quant modes, per operand: 1 = per tensor, HiFloat8 codes (x*_dtype = torch_npu.hifloat8) with a float32 scale
([1]; the weight's may hold one per expert); 6 = MX, float8 values with e8m0 block scales along K
(gmm_x_scale [A, ceil(H / 64), 2], gmm_weight_scale [e, ceil(H / 64), N, 2]; *_scale_dtype =
torch_npu.float8_e8m0fnu). Communicating first, the rows travel quantised with their scale rows; each product is
that of the dequantised operands (exact float32 values: the scales are powers of two, or one factor per tensor),
accumulated in float32 and rounded to gmm_y_dtype (mm_y_dtype for the shared expert's mm_y).
"""

import math

import torch

from torch_npu._c_children import DTypeNumber
from torch_npu.ops._common import check, dtype_of
from torch_npu.ops.add_quant_matmul import float8_values
from torch_npu.ops.alltoallv_gmm import ep_group, exchange_rows, expert_counts, reorder_rows
from torch_npu.ops.registration import npu_op

__all__ = []

_PER_TENSOR, _MX = 1, 6
_WORLD_SIZES = (2, 4, 8, 16, 32, 64, 128, 256)


def _powers(scale, blocks):
    """e8m0 bytes [.., pairs, 2] (pairs along K) -> 2^(byte - 127) per K block [.., blocks]."""
    exponent = scale.view(torch.uint8).float()
    return torch.exp2(exponent - 127).flatten(-2)[..., :blocks]


def _dequantised_x(x, scale, mode, dtype, scale_dtype, name, op):
    """float32 [rows, K] of a quantised activation."""
    values = float8_values(x, dtype, name, op)
    if mode == _PER_TENSOR:
        check(scale.dtype == torch.float32 and scale.numel() == 1, op, f"{name}_scale must be one float32 value for per-tensor quant mode")  # fmt: skip
        return values * scale.float().reshape(())
    check(mode == _MX, op, f"{name}_quant_mode must be 1 (per tensor, HiFloat8) or 6 (MX), got {mode}")
    check(scale_dtype is not None and int(scale_dtype) == DTypeNumber.float8_e8m0fnu, op,
          f"The input {name}_scale_dtype must be provided for mx quant mode.")  # fmt: skip
    k = values.shape[-1]
    blocks = math.ceil(k / 32)
    check(scale.dim() == 3 and scale.shape[0] == values.shape[0], op, f"The dim of {name}_scale should be 3, but got {scale.dim()}.")  # fmt: skip
    return values * _powers(scale, blocks).repeat_interleave(32, -1)[..., :k]


def _dequantised_weight(w, scale, mode, dtype, scale_dtype, name, op):
    """float32 [e, K, N] of a quantised expert weight (3-D) or [K, N] (2-D)."""
    values = float8_values(w, dtype, name, op)
    if mode == _PER_TENSOR:
        experts = values.shape[0] if values.dim() == 3 else 1
        check(scale.dtype == torch.float32 and scale.numel() in (1, experts), op,
              f"{name}_scale must hold one float32 value (or one per expert) for per-tensor quant mode")  # fmt: skip
        return values * scale.float().reshape(-1, *([1] * (values.dim() - 1))) if values.dim() == 3 else values * scale.float().reshape(())  # fmt: skip
    check(mode == _MX, op, f"{name}_quant_mode must be 1 (per tensor, HiFloat8) or 6 (MX), got {mode}")
    check(scale_dtype is not None and int(scale_dtype) == DTypeNumber.float8_e8m0fnu, op,
          f"The input {name}_scale_dtype must be provided for mx quant mode.")  # fmt: skip
    k = values.shape[-2]
    blocks = math.ceil(k / 32)
    check(scale.dim() == values.dim() + 1, op, f"The dim of {name}_scale should be {values.dim() + 1}, but got {scale.dim()}.")  # fmt: skip
    per_block = _powers(scale.movedim(-3, -2), blocks)  # [.., N, blocks]
    return values * per_block.repeat_interleave(32, -1)[..., :k].transpose(-1, -2)


def _grouped(rows, weight, sizes):
    out, start = [], 0
    for j, size in enumerate(sizes):
        out.append(rows[start : start + size] @ weight[j])
        start += size
    return torch.cat(out) if out else rows.new_empty(0, weight.shape[-1])


def _shared(mm, op):
    mm_x, mm_weight, mm_x_scale, mm_weight_scale, x_mode, w_mode, x_dtype, w_dtype, xs_dtype, ws_dtype, y_dtype, like = mm  # fmt: skip
    check((mm_x is None) == (mm_weight is None), op, "The input mm_x and mm_weight must be both provided or both None")  # fmt: skip
    if mm_x is None:
        return like.new_empty(0)
    check(y_dtype is not None, op, "The input mm_y_dtype must be provided when mm_x and mm_weight are present.")
    check(x_mode is not None and w_mode is not None, op, "The input mm_x_quant_mode and mm_weight_quant_mode must be provided when mm_x is present.")  # fmt: skip
    a = _dequantised_x(mm_x, mm_x_scale, x_mode, x_dtype, xs_dtype, "mm_x", op)
    b = _dequantised_weight(mm_weight, mm_weight_scale, w_mode, w_dtype, ws_dtype, "mm_weight", op)
    return (a @ b).to(dtype_of(y_dtype, op))


def _modes(gmm_x_quant_mode, gmm_weight_quant_mode, ep_world_size, op):
    check(gmm_x_quant_mode is not None, op, "The input gmm_x_quant_mode must be provided, but got None.")
    check(gmm_weight_quant_mode is not None, op, "The input gmm_weight_quant_mode must be provided, but got None.")
    check(ep_world_size in _WORLD_SIZES, op, f"The input ep_world_size should be in [2, 4, 8, 16, 32, 64, 128, 256], but got {ep_world_size}.")  # fmt: skip


_SIG = (
    "Tensor gmm_x, Tensor gmm_weight, Tensor gmm_x_scale, Tensor gmm_weight_scale, str hcom, int ep_world_size, "
    "int[] send_counts, int[] recv_counts, int gmm_y_dtype, *, Tensor? send_counts_tensor=None, "
    "Tensor? recv_counts_tensor=None, Tensor? mm_x=None, Tensor? mm_weight=None, Tensor? mm_x_scale=None, "
    "Tensor? mm_weight_scale=None"
)
_DTYPE_ARGS = (
    "int? gmm_x_dtype=None, int? gmm_weight_dtype=None, int? gmm_x_scale_dtype=None, int? gmm_weight_scale_dtype=None, "
    "int? mm_x_dtype=None, int? mm_weight_dtype=None, int? mm_x_scale_dtype=None, int? mm_weight_scale_dtype=None"
)


def _mm_fake(mm_x, mm_weight, mm_y_dtype, like, op):
    if mm_x is None:
        return like.new_empty(0)
    return mm_x.new_empty(mm_x.shape[0], mm_weight.shape[-1], dtype=dtype_of(mm_y_dtype, op))


def _alltoallv_fake(gmm_x, gmm_weight, gmm_x_scale, gmm_weight_scale, hcom, ep_world_size, send_counts, recv_counts,
                    gmm_y_dtype, *, mm_x=None, mm_weight=None, permute_out_flag=False, mm_y_dtype=None, **kwargs):  # fmt: skip
    op = "npu_alltoallv_quant_gmm"
    rows = sum(recv_counts)
    permuted = gmm_x.new_empty(rows, gmm_x.shape[1]) if permute_out_flag else gmm_x.new_empty(0)
    return (gmm_x.new_empty(rows, gmm_weight.shape[-1], dtype=dtype_of(gmm_y_dtype, op)),
            _mm_fake(mm_x, mm_weight, mm_y_dtype, gmm_x, op), permuted)  # fmt: skip


@npu_op(
    f"npu_alltoallv_quant_gmm({_SIG}, int? gmm_x_quant_mode=None, int? gmm_weight_quant_mode=None, "
    "int? mm_x_quant_mode=None, int? mm_weight_quant_mode=None, bool permute_out_flag=False, int[]? group_size=None, "
    f"{_DTYPE_ARGS}, int? mm_y_dtype=None, str? comm_mode=None) -> (Tensor, Tensor, Tensor)",
    fake=_alltoallv_fake,
)
def npu_alltoallv_quant_gmm(gmm_x, gmm_weight, gmm_x_scale, gmm_weight_scale, hcom, ep_world_size, send_counts,
                            recv_counts, gmm_y_dtype, *, send_counts_tensor=None, recv_counts_tensor=None, mm_x=None,
                            mm_weight=None, mm_x_scale=None, mm_weight_scale=None, gmm_x_quant_mode=None,
                            gmm_weight_quant_mode=None, mm_x_quant_mode=None, mm_weight_quant_mode=None,
                            permute_out_flag=False, group_size=None, gmm_x_dtype=None, gmm_weight_dtype=None,
                            gmm_x_scale_dtype=None, gmm_weight_scale_dtype=None, mm_x_dtype=None,
                            mm_weight_dtype=None, mm_x_scale_dtype=None, mm_weight_scale_dtype=None, mm_y_dtype=None,
                            comm_mode=None):  # fmt: skip
    """(gmm_y, mm_y, permute_out): exchange the quantised rows (and their MX scale rows), then the expert matmuls."""
    op = "npu_alltoallv_quant_gmm"
    _modes(gmm_x_quant_mode, gmm_weight_quant_mode, ep_world_size, op)
    check(gmm_x.dim() == 2, op, f"The dim of gmm_x should be 2, but got {gmm_x.dim()}.")
    check(gmm_weight.dim() == 3, op, f"The dim of gmm_weight should be 3, but got {gmm_weight.dim()}.")
    send, recv, experts = expert_counts(gmm_x, gmm_weight, send_counts, recv_counts, ep_world_size, op)
    group = ep_group(hcom, ep_world_size, op)
    received = exchange_rows(gmm_x, send, recv, group)
    permuted = reorder_rows(received, recv, ep_world_size, experts, rank_major=True)
    scale = gmm_x_scale
    if gmm_x_quant_mode == _MX:
        flat = exchange_rows(gmm_x_scale.reshape(gmm_x_scale.shape[0], -1), send, recv, group)
        scale = reorder_rows(flat, recv, ep_world_size, experts, rank_major=True).reshape(-1, *gmm_x_scale.shape[1:])
    a = _dequantised_x(permuted, scale, gmm_x_quant_mode, gmm_x_dtype, gmm_x_scale_dtype, "gmm_x", op)
    b = _dequantised_weight(gmm_weight, gmm_weight_scale, gmm_weight_quant_mode, gmm_weight_dtype, gmm_weight_scale_dtype, "gmm_weight", op)  # fmt: skip
    sizes = [sum(recv[r][j] for r in range(ep_world_size)) for j in range(experts)]
    gmm_y = _grouped(a, b, sizes).to(dtype_of(gmm_y_dtype, op))
    mm = (mm_x, mm_weight, mm_x_scale, mm_weight_scale, mm_x_quant_mode, mm_weight_quant_mode, mm_x_dtype,
          mm_weight_dtype, mm_x_scale_dtype, mm_weight_scale_dtype, mm_y_dtype, gmm_x)  # fmt: skip
    return gmm_y, _shared(mm, op), permuted if permute_out_flag else gmm_x.new_empty(0)


def _gmm_alltoallv_fake(gmm_x, gmm_weight, gmm_x_scale, gmm_weight_scale, hcom, ep_world_size, send_counts,
                        recv_counts, gmm_y_dtype, *, mm_x=None, mm_weight=None, mm_y_dtype=None, **kwargs):  # fmt: skip
    op = "npu_quant_gmm_alltoallv"
    return (gmm_x.new_empty(sum(recv_counts), gmm_weight.shape[-1], dtype=dtype_of(gmm_y_dtype, op)),
            _mm_fake(mm_x, mm_weight, mm_y_dtype, gmm_x, op))  # fmt: skip


@npu_op(
    f"npu_quant_gmm_alltoallv({_SIG}, Tensor? comm_quant_scale=None, int? gmm_x_quant_mode=None, "
    "int? gmm_weight_quant_mode=None, int? mm_x_quant_mode=None, int? mm_weight_quant_mode=None, "
    f"int? comm_quant_mode=None, int[]? group_size=None, {_DTYPE_ARGS}, int? comm_quant_dtype=None, "
    "int? mm_y_dtype=None, str? comm_mode=None) -> (Tensor, Tensor)",
    fake=_gmm_alltoallv_fake,
)
def npu_quant_gmm_alltoallv(gmm_x, gmm_weight, gmm_x_scale, gmm_weight_scale, hcom, ep_world_size, send_counts,
                            recv_counts, gmm_y_dtype, *, send_counts_tensor=None, recv_counts_tensor=None, mm_x=None,
                            mm_weight=None, mm_x_scale=None, mm_weight_scale=None, comm_quant_scale=None,
                            gmm_x_quant_mode=None, gmm_weight_quant_mode=None, mm_x_quant_mode=None,
                            mm_weight_quant_mode=None, comm_quant_mode=None, group_size=None, gmm_x_dtype=None,
                            gmm_weight_dtype=None, gmm_x_scale_dtype=None, gmm_weight_scale_dtype=None,
                            mm_x_dtype=None, mm_weight_dtype=None, mm_x_scale_dtype=None, mm_weight_scale_dtype=None,
                            comm_quant_dtype=None, mm_y_dtype=None, comm_mode=None):  # fmt: skip
    """(y, mm_y): the expert matmuls in gmm_y_dtype, then the exchange back."""
    op = "npu_quant_gmm_alltoallv"
    _modes(gmm_x_quant_mode, gmm_weight_quant_mode, ep_world_size, op)
    check(comm_quant_scale is None and not comm_quant_mode and comm_quant_dtype is None, op,
          "quantised communication (comm_quant_*) is not computed by vnpu")  # fmt: skip
    check(gmm_x.dim() == 2 and gmm_weight.dim() == 3, op, "gmm_x must be 2-D and gmm_weight 3-D")
    send, recv, experts = expert_counts(gmm_x, gmm_weight, send_counts, recv_counts, ep_world_size, op)
    a = _dequantised_x(gmm_x, gmm_x_scale, gmm_x_quant_mode, gmm_x_dtype, gmm_x_scale_dtype, "gmm_x", op)
    b = _dequantised_weight(gmm_weight, gmm_weight_scale, gmm_weight_quant_mode, gmm_weight_dtype, gmm_weight_scale_dtype, "gmm_weight", op)  # fmt: skip
    sizes = [sum(send[r][j] for r in range(ep_world_size)) for j in range(experts)]
    gmm_y = _grouped(a, b, sizes).to(dtype_of(gmm_y_dtype, op))
    rank_ordered = reorder_rows(gmm_y, send, ep_world_size, experts, rank_major=False)
    y = exchange_rows(rank_ordered, send, recv, ep_group(hcom, ep_world_size, op))
    mm = (mm_x, mm_weight, mm_x_scale, mm_weight_scale, mm_x_quant_mode, mm_weight_quant_mode, mm_x_dtype,
          mm_weight_dtype, mm_x_scale_dtype, mm_weight_scale_dtype, mm_y_dtype, gmm_x)  # fmt: skip
    return y, _shared(mm, op)
