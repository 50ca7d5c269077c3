"""torch_npu.npu.npurt(): the runtime calls torch_npu exposes (``torch_npu._C._npurt``).

Each returns an ACL error code, 0 on success: ``npuStreamCreate(address)`` writes a new raw stream
handle to ``address`` (a ``ctypes.c_void_p``'s), for ``torch.npu.ExternalStream``;
``npuStreamDestroy(handle)``; ``npuHostRegister(ptr, size, flags)`` / ``npuHostUnregister(ptr)``.
"""

from types import ModuleType

from torch_npu import _C


def npurt() -> ModuleType:
    """The runtime API module (the same object on every call)."""
    return _C._npurt
