"""torch_npu.distributed.tensor.experimental: context parallelism on npu device meshes."""

from torch_npu.distributed.tensor.experimental._context_parallel import context_parallel

__all__ = ["context_parallel"]

context_parallel.__module__ = __name__
