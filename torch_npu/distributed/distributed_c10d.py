"""torch_npu.distributed.distributed_c10d: torch_npu's additions to c10d, installed in torch.distributed by the
patch registry.

- `_hccl_get_sequence_number_for_group`: ProcessGroup._get_sequence_number_for_group answers for hccl groups
  (the hccl backend's count of collectives) where c10d refuses custom backends.
- `reinit_process_group(group=None, rebuild_link=True)`: after a device fault, the group's hccl link is rebuilt
  (every rank of the group calls it; later collectives run over the new link) and the group returned; with
  rebuild_link=False the process groups on npu resume (the device must have been restarted) and None is returned.
- `_hccl_add_ephemeral_timeout_for_all_pgs(timeout)`: torch's `_add_ephemeral_timeout_for_all_pgs` (which only
  extends NCCL groups) for hccl groups: every hccl group of this rank adds `timeout` to the timeout of the
  collectives issued from now on, until the first of them has finished.
- `_batch_isend_irecv`: dist.batch_isend_irecv of npu tensors returns one work for the whole batch, as
  torch_npu's does (HCCL runs the batch as one task); every tensor of the batch must be an npu tensor.
- `_gather`: dist.gather of npu tensors on an hccl group runs as an all-gather, as torch_npu's default mode
  does (HCCL has no gather; the destination rank is warned once), or as the backend's gather when
  torch.npu.use_compatible_impl(True) is set.
"""

import logging
import math
import warnings

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from torch_npu.distributed import process_group_hccl
from torch_npu.distributed.process_group_hccl import is_hccl_available
from torch_npu.utils._error_code import ErrCode, dist_error

logger = logging.getLogger("torch.distributed")

__all__ = ["is_hccl_available", "reinit_process_group"]

_original = {
    "get_sequence_number_for_group": c10d.ProcessGroup._get_sequence_number_for_group,
    "gather": c10d.gather,
    "add_ephemeral_timeout_for_all_pgs": c10d._add_ephemeral_timeout_for_all_pgs,
    "batch_isend_irecv": c10d.batch_isend_irecv,
}
_HCCL = ("hccl", "lccl")


def _is_hccl_group(group):
    try:
        config = str(dist.get_backend_config(group))
    except (RuntimeError, ValueError):
        return False
    return any(part.rsplit(":", 1)[-1] in _HCCL for part in config.split(","))


def _hccl_get_sequence_number_for_group(self):
    if _is_hccl_group(self):
        return self._get_backend(torch.device("npu"))._get_sequence_number_for_group()
    return _original["get_sequence_number_for_group"](self)


def _hccl_add_ephemeral_timeout_for_all_pgs(timeout):
    _original["add_ephemeral_timeout_for_all_pgs"](timeout)  # the groups of other backends, as torch does
    npu = torch.device("npu")
    for group in list(c10d._world.pg_map):
        if npu in group._device_types:
            backend = group._get_backend(npu)
            if isinstance(backend, process_group_hccl.ProcessGroupHCCL):
                backend._add_ephemeral_timeout(timeout)


class _BatchWork(dist.Work):
    """The one work of an npu batch of sends and receives: done when each of them is."""

    def __init__(self, works):
        super().__init__()
        self._works = works

    def wait(self, timeout=None):
        for work in self._works:
            if timeout is None:
                work.wait()
            else:
                work.wait(timeout)
        return True

    def is_completed(self):
        return all(work.is_completed() for work in self._works)

    def is_success(self):
        return all(work.is_success() for work in self._works)

    def exception(self):
        return next((work.exception() for work in self._works if not work.is_success()), None)

    def synchronize(self):
        for work in self._works:
            work.synchronize()

    def get_future(self):
        return torch.futures.collect_all([work.get_future() for work in self._works])


def _batch_isend_irecv(p2p_op_list):
    if not p2p_op_list or p2p_op_list[0].tensor.device.type != "npu":
        return _original["batch_isend_irecv"](p2p_op_list)
    for op in p2p_op_list:
        if op.tensor.device.type != "npu":
            raise RuntimeError(
                f"No backend type associated with device type {op.tensor.device.type}" + dist_error(ErrCode.PARAM)
            )
    works = _original["batch_isend_irecv"](p2p_op_list)
    return [_BatchWork(works)] if works else []


def _gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    from torch_npu import npu

    group = c10d._group_or_default_group(group)
    if tensor.device.type != "npu" or not _is_hccl_group(group) or npu.are_compatible_impl_enabled():
        return _original["gather"](tensor, gather_list, dst, group, async_op, group_dst)
    c10d._check_single_tensor(tensor, "tensor")
    if gather_list:
        c10d._check_tensor_list(gather_list, "gather_list")
    if c10d._rank_not_in_group(group):
        c10d._warn_not_in_group("gather")
        return None
    if dst is None and group_dst is None:
        dst = 0
    group_dst = c10d._canonicalize_group_rank(group, dst, group_dst, return_global=False)
    is_dst = group.rank() == group_dst
    c10d._validate_output_list_for_rank(group.rank(), group_dst, gather_list or [])
    if is_dst:
        warnings.warn("HCCL doesn't support gather at the moment. Implemented with allgather instead.", stacklevel=2)
    # every rank receives in an all-gather: each contributes its tensor flattened and padded to the largest
    sizes = [[tuple(t.shape) for t in gather_list] if is_dst else None]
    dist.broadcast_object_list(sizes, group_src=group_dst, group=group)
    counts = [math.prod(shape) for shape in sizes[0]]
    padded = tensor.new_zeros(max(counts))
    padded[: tensor.numel()] = tensor.reshape(-1)
    received = [padded.new_empty(max(counts)) for _ in counts]
    work = group._get_backend(torch.device("npu")).allgather([received], [padded])
    work.wait()
    if is_dst:
        for out, got, count in zip(gather_list, received, counts):
            out.copy_(got[:count].view(out.shape))
    return work if async_op else None


def reinit_process_group(group=None, rebuild_link=True):
    import torch_npu

    device_id = torch.npu.current_device()
    logger.info("reinit process group, group=%s, rebuild link=%s, device=%s", group, rebuild_link, device_id)
    if torch_npu._C._is_device_stopped(device_id):
        raise RuntimeError(
            f"reinit_process_group: npu:{device_id} is stopped; call torch_npu.npu.restart_device({device_id}) first"
            + dist_error(ErrCode.UNAVAIL)
        )
    if not rebuild_link:
        logger.info("resume hccl comm end, device_id=%s", device_id)
        return None
    group = c10d._group_or_default_group(group)
    if _is_hccl_group(group):
        process_group_hccl.rebuild_link(group._get_backend(torch.device("npu")))
    logger.info("reinit hccl comm end, group=%s, device_id=%s", group, device_id)
    return group
