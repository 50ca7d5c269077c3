"""Context parallelism (a sequence sharded over the ranks of a device mesh, attention computed as a ring) on npu.

The API is PyTorch's (``torch.distributed.tensor.experimental.context_parallel`` and its helpers); what torch_npu
adds is the attention of npu tensors inside it, which `_npu_attention` provides and the patch registry enables
whenever PyTorch's context-parallel dispatcher is enabled."""

import functools

from torch.distributed.tensor.experimental._attention import context_parallel as _torch_context_parallel
from torch.distributed.tensor.experimental._attention import context_parallel_unshard as _torch_unshard
from torch.distributed.tensor.experimental._attention import set_rotate_method as _torch_set_rotate_method

__all__ = ["context_parallel", "context_parallel_unshard", "set_rotate_method"]

_SHOWN = ("__name__", "__qualname__", "__doc__", "__annotations__")


@functools.wraps(_torch_context_parallel, assigned=_SHOWN)
def context_parallel(*args, **kwargs):
    return _torch_context_parallel(*args, **kwargs)


@functools.wraps(_torch_unshard, assigned=_SHOWN)
def context_parallel_unshard(*args, **kwargs):
    return _torch_unshard(*args, **kwargs)


@functools.wraps(_torch_set_rotate_method, assigned=_SHOWN)
def set_rotate_method(*args, **kwargs):
    return _torch_set_rotate_method(*args, **kwargs)
