"""_npu_distribute_barrier: every live rank of the hccl group named `group` waits until all of them arrived
(aclnnDistributeBarrierV2). x_ref only orders the call among the caller's operators and comes back unchanged.
elastic_info ([is_elastic, live ranks, shared-expert ranks, experts, ep rank -> local rank table, local rank -> ep
rank table]) shrinks the barrier to the ranks its second table lists: ranks dropped from the job do not call.
time_out ([1] int32, microseconds, > 0) bounds the wait; past it the call fails naming the ranks still missing.

The ranks meet in the process group's store (a counter per call, the same on every live rank since each calls
the barrier the same number of times), so a barrier over a subset never needs the dropped ranks."""

import datetime

import torch
import torch.distributed as dist

from torch_npu.ops._common import check
from torch_npu.ops.matmul_collectives import process_group
from torch_npu.ops.moe_distribute_domains import elastic_table
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "_npu_distribute_barrier"
_CALLS = {}  # (group name, live ranks) -> barriers this process entered


def _live_ranks(elastic_info, world_size):
    if elastic_info is None:
        return list(range(world_size))
    is_elastic, *_, table2 = elastic_table(elastic_info, world_size, _OP)
    return sorted(r for r in table2 if r != -1) if is_elastic else list(range(world_size))


def _timeout(time_out):
    if time_out is None or int(time_out.reshape(-1)[0]) <= 0:
        return datetime.timedelta(minutes=30)  # HCCL's default collective timeout
    return datetime.timedelta(microseconds=int(time_out.reshape(-1)[0]))


@npu_op(
    "_npu_distribute_barrier(Tensor x_ref, str group, int world_size, *, Tensor? time_out=None, "
    "Tensor? elastic_info=None) -> Tensor",
    fake=lambda x_ref, group, world_size, *, time_out=None, elastic_info=None: torch.empty_like(x_ref),
)
def _npu_distribute_barrier(x_ref, group, world_size, *, time_out=None, elastic_info=None):
    """x_ref's values, once every live rank of the group has called."""
    pg = process_group(group, _OP)
    check(dist.get_world_size(pg) == world_size, _OP,
          f"world_size {world_size} differs from group {group!r}'s {dist.get_world_size(pg)}")  # fmt: skip
    live = _live_ranks(elastic_info, world_size)
    rank = dist.get_rank(pg)
    check(rank in live, _OP, f"rank {rank} is not among elastic_info's live ranks {live}")
    call = _CALLS.get((group, tuple(live)), 0)
    _CALLS[(group, tuple(live))] = call + 1
    store = dist.distributed_c10d._get_default_store()
    key = f"vnpu/distribute_barrier/{group}/{','.join(map(str, live))}/{call}"
    if store.add(f"{key}/arrived", 1) == len(live):
        store.set(f"{key}/done", "1")
    try:
        store.wait([f"{key}/done"], _timeout(time_out))
    except (RuntimeError, dist.DistStoreError) as error:
        arrived = store.add(f"{key}/arrived", 0)
        raise RuntimeError(
            f"{_OP}: rank {rank} timed out waiting for group {group!r}: {arrived} of {len(live)} ranks arrived"
        ) from error
    return x_ref.clone()
