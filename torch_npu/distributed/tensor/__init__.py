"""torch_npu.distributed.tensor: DTensor support for torch_npu's operators (sharding strategies of npu_rms_norm and
npu_rotary_mul, data / tensor parallel npu_fusion_attention) and, in `experimental`, context parallelism."""

from torch_npu.distributed.tensor._sharding_strategies import register_sharding_strategies

__all__ = ["register_sharding_strategies"]
