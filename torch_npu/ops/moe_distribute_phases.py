"""npu_moe_distribute_dispatch_setup / _teardown and npu_moe_distribute_combine_setup / _teardown: the expert-parallel
dispatch and combine split into a send-side and a receive-side call each (AICPU-SDMA, comm_type 0), with
npu_moe_distribute_dispatch / _combine's routing (see moe_distribute).

dispatch_setup packs each route (token t, choice k), in send order, into y [BS * K, token_msg_size]: the row of x
(token_msg_size = Align256(H)), or with quant_mode 2 its int8 values (dispatch's dynamic_int8) followed, at
Align32(H), by the float32 scale's 4 bytes (token_msg_size = Align512(Align32(H) + 4)); expand_idx is dispatch's
(each route's index among this rank's routes to its expert) and comm_cmd_info [ep_world_size * local experts] the
rows for each (rank, local expert).
dispatch_teardown exchanges those rows and returns (expand_x [A, H], dynamic_scales [A] (quant_mode 2, else empty),
assist_info_for_combine (the cumulative rows per (local expert, source rank)), expert_token_nums).
combine_setup lays expand_x back out source rank by source rank (quant_expand_x) with comm_cmd_info the rows per
source rank; combine_teardown returns them and sums each token's K rows weighted by expert_scales ([BS, H]).
The exchanges happen in the teardown calls. Shared-expert ranks (which CANN does not serve here either) and
communication quantisation are refused.
"""

import torch
import torch.distributed as dist

from torch_npu.ops._common import check
from torch_npu.ops.moe_distribute import (
    dynamic_int8,
    refuse_unsupported,
    route_index,
    route_plan,
    send_positions,
    transposed_blocks,
)
from torch_npu.ops.moe_distribute_domains import Domains, sized_group
from torch_npu.ops.registration import npu_op

__all__ = []

_SCALE_BYTES = 4


def _refuse_shared(op, shared_expert_rank_num):
    check(shared_expert_rank_num == 0, op, f"shared_expert_rank_num must be 0: the setup / teardown operators serve no shared-expert ranks (CANN's release does not either), got {shared_expert_rank_num}")  # fmt: skip


def _align(value, n):
    return (value + n - 1) // n * n


def _message_size(hidden, quant_mode):
    return _align(_align(hidden, 32) + _SCALE_BYTES, 512) if quant_mode == 2 else _align(hidden, 256)


def _setup_fake(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, quant_mode=0, **kwargs):
    bs, k = expert_ids.shape
    dtype = torch.int8 if quant_mode == 2 else x.dtype
    return (x.new_empty(bs * k, _message_size(x.shape[1], quant_mode), dtype=dtype),
            x.new_empty(bs * k, dtype=torch.int32), x.new_empty(moe_expert_num, dtype=torch.int32))  # fmt: skip


@npu_op(
    "npu_moe_distribute_dispatch_setup(Tensor x, Tensor expert_ids, str group_ep, int ep_world_size, int ep_rank_id, "
    "int moe_expert_num, *, Tensor? scales=None, Tensor? x_active_mask=None, int expert_shard_type=0, "
    "int shared_expert_num=1, int shared_expert_rank_num=0, int quant_mode=0, int global_bs=0, int comm_type=0, "
    'str comm_alg="", int? y_dtype=None) -> (Tensor, Tensor, Tensor)',
    fake=_setup_fake,
)
def npu_moe_distribute_dispatch_setup(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *,
                                      scales=None, x_active_mask=None, expert_shard_type=0, shared_expert_num=1,
                                      shared_expert_rank_num=0, quant_mode=0, global_bs=0, comm_type=0, comm_alg="",
                                      y_dtype=None):  # fmt: skip
    """(y, expand_idx, comm_cmd_info)."""
    op = "npu_moe_distribute_dispatch_setup"
    _refuse_shared(op, shared_expert_rank_num)
    refuse_unsupported(op, [("x_active_mask", x_active_mask is not None)])
    check(comm_type == 0, op, f"comm_type only supports 0 (AICPU-SDMA), got {comm_type}")
    check(quant_mode in (0, 2), op, f"quant_mode must be 0 (none) or 2 (dynamic), got {quant_mode}")
    check(x.dim() == 2 and expert_ids.dim() == 2 and expert_ids.shape[0] == x.shape[0], op,
          f"x must be [BS, H] and expert_ids [BS, K], got {tuple(x.shape)} and {tuple(expert_ids.shape)}")  # fmt: skip
    bs, k = expert_ids.shape
    order, _, per_expert = route_plan(expert_ids, ep_world_size, moe_expert_num, op)
    rows = x[order // k]
    hidden = x.shape[1]
    if quant_mode == 2:
        experts = expert_ids.reshape(-1)[order].long()
        smoothed = rows.float() * scales.float()[experts] if scales is not None else rows.float()
        values, row_scale = dynamic_int8(smoothed)
        y = x.new_zeros(rows.shape[0], _message_size(hidden, 2), dtype=torch.int8)
        y[:, :hidden] = values
        start = _align(hidden, 32)
        y[:, start : start + _SCALE_BYTES] = row_scale[:, None].contiguous().view(torch.int8)
    else:
        y = x.new_zeros(rows.shape[0], _message_size(hidden, 0))
        y[:, :hidden] = rows
    return y, route_index(expert_ids, order, moe_expert_num), per_expert.reshape(-1).to(torch.int32)


def _teardown_fake(x, y, expert_ids, comm_cmd_info, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *,
                   quant_mode=0, global_bs=0, **kwargs):  # fmt: skip
    bs, k = expert_ids.shape
    total = Domains(ep_world_size, ep_rank_id, moe_expert_num, 0, group=None).rows(bs, k, global_bs)
    local = moe_expert_num // ep_world_size
    return (x.new_empty(total, x.shape[1], dtype=torch.int8 if quant_mode == 2 else x.dtype),
            x.new_empty(total if quant_mode == 2 else 0, dtype=torch.float32),
            x.new_empty(ep_world_size * local, dtype=torch.int32), x.new_empty(local, dtype=torch.int64))  # fmt: skip


@npu_op(
    "npu_moe_distribute_dispatch_teardown(Tensor x, Tensor y, Tensor expert_ids, Tensor comm_cmd_info, str group_ep, "
    "int ep_world_size, int ep_rank_id, int moe_expert_num, *, int expert_shard_type=0, int shared_expert_num=1, "
    "int shared_expert_rank_num=0, int quant_mode=0, int global_bs=0, int expert_token_nums_type=1, "
    'int comm_type=0, str comm_alg="") -> (Tensor, Tensor, Tensor, Tensor)',
    fake=_teardown_fake,
)
def npu_moe_distribute_dispatch_teardown(x, y, expert_ids, comm_cmd_info, group_ep, ep_world_size, ep_rank_id,
                                         moe_expert_num, *, expert_shard_type=0, shared_expert_num=1,
                                         shared_expert_rank_num=0, quant_mode=0, global_bs=0,
                                         expert_token_nums_type=1, comm_type=0, comm_alg=""):  # fmt: skip
    """(expand_x, dynamic_scales, assist_info_for_combine, expert_token_nums)."""
    op = "npu_moe_distribute_dispatch_teardown"
    _refuse_shared(op, shared_expert_rank_num)
    group = sized_group(group_ep, ep_world_size, ep_rank_id, "ep", op)
    bs, k = expert_ids.shape
    local = moe_expert_num // ep_world_size
    per_expert = comm_cmd_info.reshape(ep_world_size, local).long()
    check(y.shape[0] == int(per_expert.sum()), op, f"y holds {y.shape[0]} routes, comm_cmd_info {int(per_expert.sum())}")  # fmt: skip
    counts = torch.empty_like(per_expert.reshape(-1))
    dist.all_to_all_single(counts, per_expert.reshape(-1).contiguous(), group=group)
    received = counts.reshape(ep_world_size, local)
    got = y.new_empty(int(received.sum()), y.shape[1])
    dist.all_to_all_single(got, y.contiguous(), received.sum(1).tolist(), per_expert.sum(1).tolist(), group=group)
    arranged = transposed_blocks(got, received)  # (source, local expert) -> (local expert, source)
    total = Domains(ep_world_size, ep_rank_id, moe_expert_num, 0, group=None).rows(bs, k, global_bs)
    check(arranged.shape[0] <= total, op, f"this rank received {arranged.shape[0]} rows, more than A = {total}: pass global_bs")  # fmt: skip
    hidden = x.shape[1]
    if quant_mode == 2:
        expand_x = x.new_zeros(total, hidden, dtype=torch.int8)
        expand_x[: arranged.shape[0]] = arranged[:, :hidden]
        start = _align(hidden, 32)
        dynamic_scales = x.new_zeros(total, dtype=torch.float32)
        dynamic_scales[: arranged.shape[0]] = arranged[:, start : start + _SCALE_BYTES].contiguous().view(torch.float32)[:, 0]  # fmt: skip
    else:
        expand_x = x.new_zeros(total, hidden)
        expand_x[: arranged.shape[0]] = arranged[:, :hidden]
        dynamic_scales = x.new_empty(0, dtype=torch.float32)
    per_local = received.sum(0)
    expert_token_nums = (per_local if expert_token_nums_type == 1 else per_local.cumsum(0)).to(torch.int64)
    assist_info = received.t().reshape(-1).cumsum(0).to(torch.int32)  # (local expert, source rank), cumulative
    return expand_x, dynamic_scales, assist_info, expert_token_nums


@npu_op(
    "npu_moe_distribute_combine_setup(Tensor expand_x, Tensor expert_ids, Tensor assist_info_for_combine, "
    "str group_ep, int ep_world_size, int ep_rank_id, int moe_expert_num, *, int expert_shard_type=0, "
    "int shared_expert_num=1, int shared_expert_rank_num=0, int global_bs=0, int comm_quant_mode=0, "
    'int comm_type=0, str comm_alg="") -> (Tensor, Tensor)',
    fake=lambda expand_x, expert_ids, assist_info_for_combine, group_ep, ep_world_size, *args, **kwargs: (
        torch.empty_like(expand_x),
        expand_x.new_empty(ep_world_size, dtype=torch.int32),
    ),  # fmt: skip
)
def npu_moe_distribute_combine_setup(expand_x, expert_ids, assist_info_for_combine, group_ep, ep_world_size,
                                     ep_rank_id, moe_expert_num, *, expert_shard_type=0, shared_expert_num=1,
                                     shared_expert_rank_num=0, global_bs=0, comm_quant_mode=0, comm_type=0,
                                     comm_alg=""):  # fmt: skip
    """(quant_expand_x: the rows in (source rank, local expert) order, comm_cmd_info: rows per source rank)."""
    op = "npu_moe_distribute_combine_setup"
    _refuse_shared(op, shared_expert_rank_num)
    refuse_unsupported(op, [("comm_quant_mode", comm_quant_mode)])
    local = moe_expert_num // ep_world_size
    cumulative = assist_info_for_combine.reshape(-1)[: local * ep_world_size].long()
    counts = torch.diff(cumulative, prepend=cumulative.new_zeros(1)).reshape(local, ep_world_size)
    used = int(counts.sum())
    back = transposed_blocks(expand_x[:used], counts)  # (local expert, source) -> (source, local expert)
    quant_expand_x = torch.zeros_like(expand_x)
    quant_expand_x[:used] = back
    return quant_expand_x, counts.sum(0).to(torch.int32)


@npu_op(
    "npu_moe_distribute_combine_teardown(Tensor expand_x, Tensor quant_expand_x, Tensor expert_ids, "
    "Tensor expand_idx, Tensor expert_scales, Tensor comm_cmd_info, str group_ep, int ep_world_size, "
    "int ep_rank_id, int moe_expert_num, *, Tensor? x_active_mask=None, Tensor? shared_expert_x=None, "
    "int expert_shard_type=0, int shared_expert_num=1, int shared_expert_rank_num=0, int global_bs=0, "
    'int comm_quant_mode=0, int comm_type=0, str comm_alg="") -> Tensor',
    fake=lambda expand_x, quant_expand_x, expert_ids, *args, **kwargs: expand_x.new_empty(
        expert_ids.shape[0], expand_x.shape[1]
    ),  # fmt: skip
)
def npu_moe_distribute_combine_teardown(expand_x, quant_expand_x, expert_ids, expand_idx, expert_scales,
                                        comm_cmd_info, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *,
                                        x_active_mask=None, shared_expert_x=None, expert_shard_type=0,
                                        shared_expert_num=1, shared_expert_rank_num=0, global_bs=0,
                                        comm_quant_mode=0, comm_type=0, comm_alg=""):  # fmt: skip
    """[BS, H]: each token's expert rows back, summed with expert_scales (plus shared_expert_x)."""
    op = "npu_moe_distribute_combine_teardown"
    _refuse_shared(op, shared_expert_rank_num)
    refuse_unsupported(op, [("comm_quant_mode", comm_quant_mode), ("x_active_mask", x_active_mask is not None)])  # fmt: skip
    group = sized_group(group_ep, ep_world_size, ep_rank_id, "ep", op)
    bs, k = expert_ids.shape
    _, per_rank, _ = route_plan(expert_ids, ep_world_size, moe_expert_num, op)
    send = comm_cmd_info.reshape(-1).long()
    rows = quant_expand_x[: int(send.sum())]
    got = rows.new_empty(bs * k, expand_x.shape[1])
    dist.all_to_all_single(got, rows.contiguous(), per_rank.tolist(), send.tolist(), group=group)
    per_route = got[send_positions(expert_ids, expand_idx, moe_expert_num)].float().reshape(bs, k, -1)
    out = (per_route * expert_scales.float().reshape(bs, k, 1)).sum(1)
    if shared_expert_x is not None:
        out = out + shared_expert_x.float()
    return out.to(expand_x.dtype)
