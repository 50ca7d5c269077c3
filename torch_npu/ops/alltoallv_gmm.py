"""npu_alltoallv_gmm / npu_gmm_alltoallv: expert parallelism's token exchange fused with the routed experts'
grouped matmul (and, beside it, a shared expert's plain matmul), over the hccl group named `hcom`.

With e = local experts per rank and r = ep_world_size, counts are [r * e] lists indexed (rank, local expert):

npu_alltoallv_gmm (communicate first): gmm_x's rows are ordered by (destination rank, its local expert) with
send_counts[rank * e + j] rows for expert j of that rank; the all-to-all-v delivers recv_counts[rank * e + j]
rows from each rank for this rank's expert j, ordered (source rank, expert); they are permuted to (expert,
source rank) order (permute_out) and multiplied by gmm_weight[j] ([e, H, N]; [e, N, H] with
trans_gmm_weight) per expert. Returns (gmm_y, mm_y, permute_out).

npu_gmm_alltoallv (compute first): gmm_x's rows are grouped (local expert, source rank) as npu_alltoallv_gmm
left them, send_counts[rank * e + j] of them for expert j going back to rank; the grouped matmul runs, its rows
are put back in (rank, expert) order and the all-to-all-v returns them (recv_counts as above). Returns
(y, mm_y).

mm_y = mm_x @ mm_weight (trans_mm_weight: mm_weight^T), empty without mm_x. Products accumulate in float32.
The counts must be the host lists (send_counts_tensor / recv_counts_tensor are not read).
"""

import torch
import torch.distributed as dist

from torch_npu.ops._common import check
from torch_npu.ops.matmul_collectives import process_group
from torch_npu.ops.registration import npu_op

__all__ = []


def _layout(counts, world, op, name):
    check(len(counts) % world == 0, op, f"{name} must hold ep_world_size * local experts counts, got {len(counts)}")
    experts = len(counts) // world
    return [[int(counts[r * experts + j]) for j in range(experts)] for r in range(world)], experts


def exchange_rows(rows, send, recv, group):
    out = rows.new_empty(sum(map(sum, recv)), rows.shape[1])
    dist.all_to_all_single(out, rows.contiguous(), [sum(c) for c in recv], [sum(c) for c in send], group=group)
    return out


def reorder_rows(rows, counts, world, experts, rank_major):
    """rows in (rank, expert) blocks -> (expert, rank) blocks (rank_major), or back."""
    blocks, start = {}, 0
    order = [(r, j) for r in range(world) for j in range(experts)] if rank_major else [(r, j) for j in range(experts) for r in range(world)]  # fmt: skip
    for r, j in order:
        blocks[r, j] = rows[start : start + counts[r][j]]
        start += counts[r][j]
    target = [(r, j) for j in range(experts) for r in range(world)] if rank_major else [(r, j) for r in range(world) for j in range(experts)]  # fmt: skip
    return torch.cat([blocks[key] for key in target]) if target else rows[:0]


def _grouped(rows, weight, sizes, transposed):
    out, start = [], 0
    for j, size in enumerate(sizes):
        w = weight[j].float().t() if transposed else weight[j].float()
        out.append(rows[start : start + size].float() @ w)
        start += size
    return torch.cat(out).to(rows.dtype)


def _shared(mm_x, mm_weight, transposed, like):
    if mm_x is None:
        return like.new_empty(0)
    w = mm_weight.float().t() if transposed else mm_weight.float()
    return (mm_x.float() @ w).to(mm_x.dtype)


def _out_width(gmm_weight, transposed):
    return gmm_weight.shape[1] if transposed else gmm_weight.shape[2]


def _mm_fake(mm_x, mm_weight, transposed, like):
    if mm_x is None:
        return like.new_empty(0)
    return mm_x.new_empty(mm_x.shape[0], mm_weight.shape[0] if transposed else mm_weight.shape[1])


def _alltoallv_gmm_fake(gmm_x, gmm_weight, hcom, ep_world_size, send_counts, recv_counts, *, mm_x=None,
                        mm_weight=None, trans_gmm_weight=False, trans_mm_weight=False, permute_out_flag=False,
                        **kwargs):  # fmt: skip
    rows = sum(recv_counts)
    permuted = gmm_x.new_empty(rows, gmm_x.shape[1]) if permute_out_flag else gmm_x.new_empty(0)
    return (gmm_x.new_empty(rows, _out_width(gmm_weight, trans_gmm_weight)),
            _mm_fake(mm_x, mm_weight, trans_mm_weight, gmm_x), permuted)  # fmt: skip


def _gmm_alltoallv_fake(gmm_x, gmm_weight, hcom, ep_world_size, send_counts, recv_counts, *, mm_x=None,
                        mm_weight=None, trans_gmm_weight=False, trans_mm_weight=False, **kwargs):  # fmt: skip
    return (gmm_x.new_empty(sum(recv_counts), _out_width(gmm_weight, trans_gmm_weight)),
            _mm_fake(mm_x, mm_weight, trans_mm_weight, gmm_x))  # fmt: skip


_COMMON = (
    "Tensor gmm_x, Tensor gmm_weight, str hcom, int ep_world_size, int[] send_counts, int[] recv_counts, *, "
    "Tensor? send_counts_tensor=None, Tensor? recv_counts_tensor=None, Tensor? mm_x=None, Tensor? mm_weight=None, "
    "bool trans_gmm_weight=False, bool trans_mm_weight=False"
)


def expert_counts(gmm_x, gmm_weight, send_counts, recv_counts, world, op):
    """(send, recv as [rank][expert] lists, local experts), checked against the inputs."""
    send, experts = _layout(send_counts, world, op, "send_counts")
    recv, _ = _layout(recv_counts, world, op, "recv_counts")
    check(sum(map(sum, send)) == gmm_x.shape[0], op, f"send_counts sum to {sum(map(sum, send))}, gmm_x has {gmm_x.shape[0]} rows")  # fmt: skip
    check(gmm_weight.shape[0] == experts, op, f"gmm_weight must hold {experts} local experts, got {gmm_weight.shape[0]}")  # fmt: skip
    return send, recv, experts


def ep_group(hcom, world, op):
    group = process_group(hcom, op)
    check(dist.get_world_size(group) == world, op, f"ep_world_size {world} differs from the group's {dist.get_world_size(group)}")  # fmt: skip
    return group


@npu_op(
    f"npu_alltoallv_gmm({_COMMON}, bool permute_out_flag=False, str? comm_mode=None) -> (Tensor, Tensor, Tensor)",
    fake=_alltoallv_gmm_fake,
)
def npu_alltoallv_gmm(gmm_x, gmm_weight, hcom, ep_world_size, send_counts, recv_counts, *, send_counts_tensor=None,
                      recv_counts_tensor=None, mm_x=None, mm_weight=None, trans_gmm_weight=False,
                      trans_mm_weight=False, permute_out_flag=False, comm_mode=None):  # fmt: skip
    """(gmm_y, mm_y, permute_out)."""
    op = "npu_alltoallv_gmm"
    send, recv, experts = expert_counts(gmm_x, gmm_weight, send_counts, recv_counts, ep_world_size, op)
    received = exchange_rows(gmm_x, send, recv, ep_group(hcom, ep_world_size, op))
    permuted = reorder_rows(received, recv, ep_world_size, experts, rank_major=True)
    sizes = [sum(recv[r][j] for r in range(ep_world_size)) for j in range(experts)]
    gmm_y = _grouped(permuted, gmm_weight, sizes, trans_gmm_weight)
    return gmm_y, _shared(mm_x, mm_weight, trans_mm_weight, gmm_x), permuted if permute_out_flag else gmm_x.new_empty(0)


@npu_op(
    f"npu_gmm_alltoallv({_COMMON}, str? comm_mode=None) -> (Tensor, Tensor)",
    fake=_gmm_alltoallv_fake,
)
def npu_gmm_alltoallv(gmm_x, gmm_weight, hcom, ep_world_size, send_counts, recv_counts, *, send_counts_tensor=None,
                      recv_counts_tensor=None, mm_x=None, mm_weight=None, trans_gmm_weight=False,
                      trans_mm_weight=False, comm_mode=None):  # fmt: skip
    """(y, mm_y)."""
    op = "npu_gmm_alltoallv"
    send, recv, experts = expert_counts(gmm_x, gmm_weight, send_counts, recv_counts, ep_world_size, op)
    sizes = [sum(send[r][j] for r in range(ep_world_size)) for j in range(experts)]
    gmm_y = _grouped(gmm_x, gmm_weight, sizes, trans_gmm_weight)
    rank_ordered = reorder_rows(gmm_y, send, ep_world_size, experts, rank_major=False)
    y = exchange_rows(rank_ordered, send, recv, ep_group(hcom, ep_world_size, op))
    return y, _shared(mm_x, mm_weight, trans_mm_weight, gmm_x)
