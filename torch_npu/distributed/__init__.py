"""torch_npu.distributed: the ``hccl`` backend for npu tensors (process_group_hccl.py), torch_npu's uneven
collectives (uneven_collectives.py), its additions to c10d (distributed_c10d.py, nn/), ParallelStore and the
parallel:// rendezvous (parallel_store.py, rendezvous.py)."""

import torch.distributed as _dist

from torch_npu.distributed import distributed_c10d, nn, process_group_hccl, rendezvous  # noqa: F401
from torch_npu.distributed.distributed_c10d import reinit_process_group
from torch_npu.distributed.parallel_store import ParallelStore  # noqa: F401  (torch_npu.distributed.ParallelStore)
from torch_npu.distributed.process_group_hccl import ProcessGroupHCCL, get_hccl_comm_name, is_hccl_available
from torch_npu.distributed.uneven_collectives import (
    all_gather_into_tensor_uneven,
    all_to_all_vc,
    reduce_scatter_tensor_uneven,
)

is_available = _dist.is_available
# DDP checks through this function that every rank's parameters have the same shapes and strides: c10d's own,
# which all-gathers the parameters' metadata over the group's backend (hccl included); torch_npu exports it here.
_verify_params_across_processes = _dist._verify_params_across_processes


def register_backends():
    """Register hccl / lccl for the npu device and the parallel:// rendezvous (once)."""
    process_group_hccl.register_backends()
    rendezvous.register()


__all__ = [
    "ProcessGroupHCCL",
    "is_available",
    "is_hccl_available",
    "reinit_process_group",
    "get_hccl_comm_name",
    "all_gather_into_tensor_uneven",
    "reduce_scatter_tensor_uneven",
    "all_to_all_vc",
]
