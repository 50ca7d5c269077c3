"""torch_npu.distributed.distributed_c10d: torch_npu's additions to c10d."""

from torch_npu.distributed.process_group_hccl import is_hccl_available

__all__ = ["is_hccl_available"]
