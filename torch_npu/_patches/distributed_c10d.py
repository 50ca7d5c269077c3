"""torch.distributed changes for hccl groups (torch_npu.distributed.distributed_c10d holds the functions)."""

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d


def sequence_numbers_of_hccl_groups():
    from torch_npu.distributed.distributed_c10d import _hccl_get_sequence_number_for_group

    if c10d.ProcessGroup._get_sequence_number_for_group is _hccl_get_sequence_number_for_group:
        return False
    c10d.ProcessGroup._get_sequence_number_for_group = _hccl_get_sequence_number_for_group
    return True


def ephemeral_timeouts_of_hccl_groups():
    from torch_npu.distributed.distributed_c10d import _hccl_add_ephemeral_timeout_for_all_pgs

    if c10d._add_ephemeral_timeout_for_all_pgs is _hccl_add_ephemeral_timeout_for_all_pgs:
        return False
    c10d._add_ephemeral_timeout_for_all_pgs = _hccl_add_ephemeral_timeout_for_all_pgs
    return True


def one_work_per_npu_p2p_batch():
    from torch_npu.distributed.distributed_c10d import _batch_isend_irecv

    if dist.batch_isend_irecv is _batch_isend_irecv:
        return False
    dist.batch_isend_irecv = c10d.batch_isend_irecv = _batch_isend_irecv
    return True


def gather_through_allgather():
    from torch_npu.distributed.distributed_c10d import _gather

    if dist.gather is _gather:
        return False
    dist.gather = c10d.gather = _gather
    return True


def reinit_process_group_in_torch_distributed():
    from torch_npu.distributed.distributed_c10d import reinit_process_group

    if getattr(dist, "reinit_process_group", None) is reinit_process_group:
        return False
    dist.reinit_process_group = reinit_process_group
    return True


def _planned_ranks_agree(process_group, tensors, logger=None):
    """Planning mode's stand-in for DDP's check that every rank has the same parameter shapes."""


def no_parameter_check_in_planning_mode():
    import torch.nn.parallel.distributed as ddp

    from torch_npu import _C

    if not _C._plan_mode() or ddp._verify_param_shape_across_processes is _planned_ranks_agree:
        return False
    ddp._verify_param_shape_across_processes = _planned_ranks_agree
    return True
