"""torch_npu's uneven collectives, composed exactly from even ones.

all_gather_into_tensor_uneven: rank r contributes output_split_sizes[r] rows (dim 0), gathered in rank
order into `output`; each rank's input is padded to the largest split and all-gathered, then the rows are
copied out. reduce_scatter_tensor_uneven: `input`'s rows split by input_split_sizes; rank r receives the
reduction of split r, from one all_reduce of the whole input. Without split sizes the splits are even.
all_to_all_vc: HCCL's variable-count all-to-all; every rank passes the same [world][world] matrix of element
counts (row i: what rank i sends to each rank), and this rank's row and column become the split sizes of one
all_to_all_single over the flattened buffers.
"""

import warnings

import torch
import torch.distributed as dist

from torch_npu.utils._error_code import ErrCode, dist_error

__all__ = ["all_gather_into_tensor_uneven", "reduce_scatter_tensor_uneven", "all_to_all_vc"]


class _DoneWork:
    """What async_op=True returns: the composition has already completed when it is handed back."""

    def __init__(self, result):
        self._result = result

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def get_future(self):
        future = torch.futures.Future()
        future.set_result([self._result])
        return future


def _splits(sizes, total, world, what):
    if sizes is None:
        if total % world:
            raise ValueError(
                f"{what}: {total} rows do not split evenly over {world} ranks; pass the split sizes"
                + dist_error(ErrCode.PARAM)
            )
        return [total // world] * world
    sizes = [int(s) for s in sizes]
    if len(sizes) != world or sum(sizes) != total or min(sizes) < 0:
        raise ValueError(
            f"{what}: split sizes {sizes} must give {world} non-negative parts summing to {total}"
            + dist_error(ErrCode.PARAM)
        )
    return sizes


def all_gather_into_tensor_uneven(output, input, output_split_sizes=None, group=None, async_op=False):
    world = dist.get_world_size(group)
    sizes = _splits(output_split_sizes, output.shape[0], world, "all_gather_into_tensor_uneven")
    rank = dist.get_rank(group)
    if input.shape[0] != sizes[rank] or input.shape[1:] != output.shape[1:]:
        raise ValueError(
            f"all_gather_into_tensor_uneven: rank {rank}'s input {tuple(input.shape)} does not match "
            f"its split of {sizes[rank]} rows of {tuple(output.shape[1:])}" + dist_error(ErrCode.PARAM)
        )
    longest = max(sizes)
    padded = input.new_zeros((longest, *input.shape[1:]))
    padded[: input.shape[0]] = input
    gathered = input.new_empty((world * longest, *input.shape[1:]))
    dist.all_gather_into_tensor(gathered, padded, group=group)
    offset = 0
    for r, n in enumerate(sizes):
        output[offset : offset + n] = gathered[r * longest : r * longest + n]
        offset += n
    return _DoneWork(output) if async_op else None


def reduce_scatter_tensor_uneven(
    output, input, input_split_sizes=None, op=dist.ReduceOp.SUM, group=None, async_op=False
):
    world = dist.get_world_size(group)
    sizes = _splits(input_split_sizes, input.shape[0], world, "reduce_scatter_tensor_uneven")
    rank = dist.get_rank(group)
    if output.shape[0] != sizes[rank] or input.shape[1:] != output.shape[1:]:
        raise ValueError(
            f"reduce_scatter_tensor_uneven: rank {rank}'s output {tuple(output.shape)} does not match "
            f"its split of {sizes[rank]} rows of {tuple(input.shape[1:])}" + dist_error(ErrCode.PARAM)
        )
    whole = input.clone()
    dist.all_reduce(whole, op=op, group=group)
    start = sum(sizes[:rank])
    output.copy_(whole[start : start + sizes[rank]])
    return _DoneWork(output) if async_op else None


def _count_matrix(send_count_matrix, world):
    if len(send_count_matrix) != world:
        raise ValueError(f"send_count_matrix must have {world} rows (group size), got {len(send_count_matrix)}")
    rows = []
    for row in send_count_matrix:
        if len(row) != world:
            raise ValueError(
                f"send_count_matrix must be a square [{world}][{world}] matrix; got a row of length {len(row)}"
            )
        rows.append([int(v) for v in row])
    if any(v < 0 for row in rows for v in row):
        raise ValueError("send_count_matrix: element counts must be non-negative" + dist_error(ErrCode.PARAM))
    return rows


def all_to_all_vc(output, input, send_count_matrix, group=None, async_op=False):
    if output.device.type != "npu" or input.device.type != "npu":
        warnings.warn("Support for Tensors is limited to those of type npu")
        return None
    world = dist.get_world_size(group)
    rows = _count_matrix(send_count_matrix, world)
    rank = dist.get_rank(group)
    sends = rows[rank]
    receives = [rows[source][rank] for source in range(world)]
    if input.numel() != sum(sends) or output.numel() != sum(receives):
        raise ValueError(
            f"all_to_all_vc: rank {rank} sends {sum(sends)} and receives {sum(receives)} elements by "
            f"send_count_matrix, but input has {input.numel()} and output {output.numel()}" + dist_error(ErrCode.PARAM)
        )
    if not output.is_contiguous() or not input.is_contiguous():
        raise ValueError("all_to_all_vc: input and output must be contiguous" + dist_error(ErrCode.PARAM))
    if output.numel() and input.numel() and output.data_ptr() == input.data_ptr():
        raise ValueError(
            "all_to_all_vc: output must not share memory with input (in-place is not supported)"
            + dist_error(ErrCode.PARAM)
        )
    dist.all_to_all_single(output.view(-1), input.view(-1), receives, sends, group=group)
    return _DoneWork(output) if async_op else None
