"""torch_npu.distributed.nn: autograd-aware collectives (torch.distributed.nn) on hccl groups."""

from torch_npu.distributed.nn import functional  # noqa: F401

__all__ = []
