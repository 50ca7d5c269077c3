"""torch_npu.distributed: the ``hccl`` backend for npu tensors (process_group_hccl.py) and torch_npu's uneven
collectives (uneven_collectives.py)."""

import torch.distributed as _dist

from torch_npu.distributed.process_group_hccl import (
    ProcessGroupHCCL,
    get_hccl_comm_name,
    is_hccl_available,
    register_backends,  # noqa: F401 (public name of torch_npu.distributed)
)
from torch_npu.distributed.uneven_collectives import (
    all_gather_into_tensor_uneven,
    all_to_all_vc,
    reduce_scatter_tensor_uneven,
)

is_available = _dist.is_available

__all__ = [
    "ProcessGroupHCCL",
    "is_available",
    "is_hccl_available",
    "get_hccl_comm_name",
    "all_gather_into_tensor_uneven",
    "reduce_scatter_tensor_uneven",
    "all_to_all_vc",
]
