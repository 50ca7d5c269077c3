"""npu_all_to_all_matmul / npu_matmul_all_to_all: the all-to-all of sequence-parallel layers fused with the
matmul before or after it (MC2), over the hccl process group named `hcom` (r = world_size ranks):

    npu_all_to_all_matmul:  comm = AlltoAll(x1.view(r, BS / r, H))            (chunk i goes to rank i)
                            all2all_out = comm.permute(1, 0, 2).view(BS / r, r * H)
                            y = all2all_out @ x2 + bias                         -> (y, all2all_out or empty)
    npu_matmul_all_to_all:  out = x1 @ x2 + bias
                            y = AlltoAll(out.view(BS, r, H2 / r).permute(1, 0, 2)).view(r * BS, H2 / r)

The products accumulate in float32 and round once to x1's dtype. all2all_axes must be empty or [-2, -1] (the
only exchange torch_npu documents); on a card the communication and the matmul overlap, here they run in turn.
"""

import torch
import torch.distributed as dist

from torch_npu.ops._common import check
from torch_npu.ops.matmul_collectives import process_group
from torch_npu.ops.registration import npu_op

__all__ = []


def _checks(x1, x2, world_size, all2all_axes, op):
    check(x1.dim() == 2 and x2.dim() == 2, op, f"x1 and x2 must be 2-D, got {tuple(x1.shape)} and {tuple(x2.shape)}")  # fmt: skip
    check(world_size >= 2, op, f"world_size must be at least 2, got {world_size}")
    check(not all2all_axes or list(all2all_axes) == [-2, -1], op, f"all2all_axes must be empty or [-2, -1], got {all2all_axes}")  # fmt: skip


def exchanged(chunks, hcom, world_size, op):
    """all-to-all of chunks [r, ...] (chunk i to rank i) over the group named hcom."""
    group = process_group(hcom, op)
    check(dist.get_world_size(group) == world_size, op, f"world_size {world_size} differs from the group's {dist.get_world_size(group)}")  # fmt: skip
    chunks = chunks.contiguous()
    received = torch.empty_like(chunks)
    dist.all_to_all_single(received, chunks, group=group)
    return received


def _product(a, b, bias, dtype):
    out = a.float() @ b.float()
    return (out + bias.float() if bias is not None else out).to(dtype)


@npu_op(
    "npu_all_to_all_matmul(Tensor x1, Tensor x2, str hcom, int world_size, Tensor? bias=None, "
    "int[]? all2all_axes=None, bool all2all_out_flag=True, str? comm_mode=None) -> (Tensor, Tensor)",
    fake=lambda x1, x2, hcom, world_size, bias=None, all2all_axes=None, all2all_out_flag=True, comm_mode=None: (
        x1.new_empty(x1.shape[0] // world_size, x2.shape[1]),
        x1.new_empty(x1.shape[0] // world_size, x1.shape[1] * world_size) if all2all_out_flag else x1.new_empty(0),
    ),
)
def npu_all_to_all_matmul(x1, x2, hcom, world_size, bias=None, all2all_axes=None, all2all_out_flag=True,
                          comm_mode=None):  # fmt: skip
    """(y [BS / r, N], all2all_out [BS / r, r * H] or empty)."""
    op = "npu_all_to_all_matmul"
    _checks(x1, x2, world_size, all2all_axes, op)
    bs, h = x1.shape
    check(bs % world_size == 0, op, f"BS ({bs}) must be divisible by world_size ({world_size})")
    check(x2.shape[0] == h * world_size, op, f"x2 must have H * world_size = {h * world_size} rows, got {x2.shape[0]}")  # fmt: skip
    received = exchanged(x1.reshape(world_size, bs // world_size, h), hcom, world_size, op)
    permuted = received.permute(1, 0, 2).reshape(bs // world_size, world_size * h)
    y = _product(permuted, x2, bias, x1.dtype)
    return y, permuted if all2all_out_flag else x1.new_empty(0)


@npu_op(
    "npu_matmul_all_to_all(Tensor x1, Tensor x2, str hcom, int world_size, Tensor? bias=None, "
    "int[]? all2all_axes=None, str? comm_mode=None) -> Tensor",
    fake=lambda x1, x2, hcom, world_size, bias=None, all2all_axes=None, comm_mode=None: x1.new_empty(
        world_size * x1.shape[0], x2.shape[1] // world_size
    ),
)
def npu_matmul_all_to_all(x1, x2, hcom, world_size, bias=None, all2all_axes=None, comm_mode=None):
    """y [r * BS, H2 / r]."""
    op = "npu_matmul_all_to_all"
    _checks(x1, x2, world_size, all2all_axes, op)
    check(x1.shape[1] == x2.shape[0], op, f"k of x1 ({x1.shape[1]}) and x2 ({x2.shape[0]}) must be equal")
    bs, h2 = x1.shape[0], x2.shape[1]
    check(h2 % world_size == 0, op, f"H2 ({h2}) must be divisible by world_size ({world_size})")
    out = _product(x1, x2, bias, x1.dtype)
    chunks = out.reshape(bs, world_size, h2 // world_size).permute(1, 0, 2)
    return exchanged(chunks, hcom, world_size, op).reshape(world_size * bs, h2 // world_size)
