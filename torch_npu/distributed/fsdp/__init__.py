"""torch_npu.distributed.fsdp: FSDP2's fully_shard for npu modules (PyTorch's, which shards over the hccl
device mesh of the module's npu device)."""

from torch.distributed.fsdp import fully_shard

__all__ = ["fully_shard"]
