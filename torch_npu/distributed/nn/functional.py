"""The backward of torch.distributed.nn.functional's all-gather into one tensor, for hccl groups.

PyTorch's `_AllGatherBase.backward` reduce-scatters the gradient on NCCL and XCCL groups and raises "Backend
not supported!" on every other; torch_npu's accepts hccl (and lccl) as well. Installed by the patch registry
when torch.distributed.nn.functional is imported.
"""

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

__all__ = []

_REDUCE_SCATTER_BACKENDS = ("nccl", "xccl", "hccl", "lccl")


def _allgather_base_backward_hccl(ctx, grad_output):
    if dist.get_backend(group=ctx.group) not in _REDUCE_SCATTER_BACKENDS:
        raise RuntimeError("Backend not supported!")
    world_size = dist.get_world_size(group=ctx.group)
    out_size = list(grad_output.size())
    if out_size[0] % world_size != 0:
        raise RuntimeError(
            f"Tensor with dimensions: {out_size} does not have first dimension divisible by world_size: {world_size}"
        )
    out_size[0] //= world_size
    gx = torch.empty(out_size, device=grad_output.device, dtype=grad_output.dtype)
    dist._reduce_scatter_base(gx, grad_output, ReduceOp.SUM, ctx.group)
    return (None, gx, None)


def install():
    """torch.distributed.nn.functional._AllGatherBase.backward = ours; True when this call installed it."""
    from torch.distributed.nn import functional

    if functional._AllGatherBase.backward is _allgather_base_backward_hccl:
        return False
    functional._AllGatherBase.backward = staticmethod(_allgather_base_backward_hccl)
    return True
