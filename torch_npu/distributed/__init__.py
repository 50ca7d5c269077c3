"""torch_npu.distributed: the ``hccl`` backend for npu tensors (process_group_hccl.py)."""
from torch_npu.distributed.process_group_hccl import (ProcessGroupHCCL, get_hccl_comm_name, is_hccl_available,
                                                     register_backends)

__all__ = ["ProcessGroupHCCL", "is_hccl_available", "get_hccl_comm_name"]
