"""torch_npu.distributed.tensor: DTensor support for torch_npu's operators (their sharding strategies)."""

from torch_npu.distributed.tensor._sharding_strategies import register_sharding_strategies

__all__ = ["register_sharding_strategies"]
