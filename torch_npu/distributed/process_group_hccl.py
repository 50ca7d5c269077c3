"""The ``hccl`` (and ``lccl``) process-group backend for npu tensors.

The transport is PyTorch's gloo process group (TCP, multi-node, tested upstream), created on the same
store: each collective hands gloo zero-copy CPU aliases of the npu tensors, so results land in the npu
memory without a copy. `dist.init_process_group("hccl")` returns this group and
`dist.get_backend()` is "hccl".
"""
import torch
import torch.distributed as dist

from torch_npu import _C

__all__ = ["ProcessGroupHCCL", "is_hccl_available", "register_backends"]


def _alias(t):
    return _C._cpu_alias(t) if t.device.type == "npu" else t


def _aliases(tensors):
    return [_alias(t) for t in tensors]


class ProcessGroupHCCL(dist.ProcessGroup):
    """A process group whose collectives run gloo over CPU aliases of npu tensors."""

    def __init__(self, store, rank, size, timeout, name="hccl"):
        super().__init__(rank, size)
        self._name = name
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)

    def getBackendName(self):  # noqa: N802 (c10d's method name)
        return self._name

    @property
    def name(self):
        return self._name

    def allreduce(self, tensors, opts=None):
        return self._gloo.allreduce(_aliases(tensors), opts or dist.AllreduceOptions())

    def allreduce_coalesced(self, tensors, opts=None):
        return self._gloo.allreduce_coalesced(_aliases(tensors), opts or dist.AllreduceCoalescedOptions())

    def broadcast(self, tensors, opts=None):
        return self._gloo.broadcast(_aliases(tensors), opts or dist.BroadcastOptions())

    def allgather(self, output_lists, input_tensors, opts=None):
        return self._gloo.allgather([_aliases(out) for out in output_lists], _aliases(input_tensors),
                                    opts or dist.AllgatherOptions())

    def _allgather_base(self, output, input, opts=None):
        return self._gloo._allgather_base(_alias(output), _alias(input), opts or dist.AllgatherOptions())

    def barrier(self, opts=None):
        return self._gloo.barrier(opts or dist.BarrierOptions())


def is_hccl_available():
    return dist.is_available() and dist.is_gloo_available()


def _creator(name):
    def create(store, rank, size, timeout):
        return ProcessGroupHCCL(store, rank, size, timeout, name)
    return create


def register_backends():
    """Register hccl and lccl for the npu device (once)."""
    if not is_hccl_available():
        return
    for name in ("hccl", "lccl"):
        if name.upper() not in dist.Backend._plugins:
            dist.Backend.register_backend(name, _creator(name), devices=["npu"])
    dist.is_hccl_available = is_hccl_available
