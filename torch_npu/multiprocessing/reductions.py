"""Pickling npu tensors and events for torch.multiprocessing.

An npu tensor sent to another process shares its storage with the sender, as torch_npu's IPC memory
handles make it on the card: writes on either side are seen by the other. vnpu's npu memory is host memory,
so the first time a storage is shared it moves into a memfd mapping (its bytes copied once; every tensor
on it follows) and the file descriptor travels the way torch.multiprocessing passes CPU storages. Shared
storages live outside the caching allocator, so its statistics no longer count them. Events travel as
their IPC handles. Everything else keeps torch's reductions.
"""

__all__ = ["rebuild_npu_event", "rebuild_npu_tensor"]

import multiprocessing

import torch
import torch.multiprocessing.reductions as torch_reductions
from torch.multiprocessing.reductions import (  # noqa: F401  (rebuild_tensor: torch_npu's module names it)
    StorageWeakRef,
    fd_id,
    rebuild_storage_empty,
    rebuild_storage_fd,
    rebuild_storage_filename,
    rebuild_tensor,
    shared_cache,
    storage_from_cache,
)

import torch_npu

_torch_reduce_tensor = torch_reductions.reduce_tensor


def rebuild_npu_event(device, handle):
    return torch.npu.Event.from_ipc_handle(device, handle)


def _npu_reduce_event(event):
    return rebuild_npu_event, (event.device, event.ipc_handle())


class _SharedMemoryHandle:
    """What identifies a shared npu storage across processes: its memfd, travelling to the receiver, and the
    memfd's identity (inode), the receiver's cache key — one storage per process however often it arrives."""

    def __init__(self, fd):
        self.identity = fd_id(fd)
        self.fd = multiprocessing.reduction.DupFd(fd)

    def __eq__(self, other):
        return isinstance(other, _SharedMemoryHandle) and other.identity == self.identity

    def __hash__(self):
        return hash(self.identity)


def _device_of(device):
    device = torch.device("npu", device) if isinstance(device, int) else torch.device(device)
    return device.index if device.index is not None else torch.npu.current_device()


def _share_npu_(self):
    """UntypedStorage._share_npu_: (device, handle, size_bytes, offset_bytes, ref_counter_handle,
    ref_counter_offset, event_handle, event_sync_required), as torch_npu's; the storage moves into shared
    memory the first time."""
    holder = torch.empty(0, dtype=torch.uint8, device=self.device).set_(self)
    fd, nbytes = torch_npu._C._share_npu_storage(holder)
    return _device_of(self.device), _SharedMemoryHandle(fd), nbytes, 0, None, 0, None, False


def _new_shared_npu(device, handle, size_bytes, offset_bytes, *_counters_and_event):
    """UntypedStorage._new_shared_npu: the storage another process shared, mapped in this one (vnpu shares
    whole storages: their offset in the shared memory is 0)."""
    if offset_bytes != 0:
        raise ValueError(f"_new_shared_npu: a shared npu storage starts its shared memory, got offset {offset_bytes}")
    fd = handle.fd.detach()
    return torch_npu._C._open_shared_npu_storage(fd, size_bytes, _device_of(device)).untyped_storage()


def _release_ipc_counter_npu(*args, **kwargs):
    """No reference counter to release: a mapping lives while any process maps it."""


def rebuild_npu_tensor(
    tensor_cls,
    tensor_size,
    tensor_stride,
    tensor_offset,
    storage_cls,
    dtype,
    storage_device,
    storage_handle,
    storage_size_bytes,
    storage_offset_bytes,
    requires_grad,
    ref_counter_handle,
    ref_counter_offset,
    event_handle,
    event_sync_required,
):
    """The receiving side: the sender's npu storage, mapped here (once per process), and the tensor on it."""
    if storage_handle is None or storage_size_bytes == 0:
        storage = torch.UntypedStorage(0, device=torch.device("npu", _device_of(storage_device)))
    else:
        storage = storage_from_cache(storage_cls, (storage_handle, storage_offset_bytes))
        if storage is None:
            torch_npu.npu._lazy_init()
            storage = storage_cls._new_shared_npu(
                storage_device,
                storage_handle,
                storage_size_bytes,
                storage_offset_bytes,
                ref_counter_handle,
                ref_counter_offset,
                event_handle,
                event_sync_required,
            )
            shared_cache[(storage_handle, storage_offset_bytes)] = StorageWeakRef(storage)
        else:
            storage_cls._release_ipc_counter_npu(ref_counter_handle, ref_counter_offset, device=storage_device)
    untyped = storage if isinstance(storage, torch.UntypedStorage) else storage._untyped_storage
    typed = torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)
    t = torch._utils._rebuild_tensor(typed, tensor_offset, tensor_size, tensor_stride)
    if tensor_cls == torch.nn.parameter.Parameter:
        return torch.nn.parameter.Parameter(t, requires_grad=requires_grad)
    t.requires_grad = requires_grad
    return t


def _npu_reduce_tensor(tensor):
    if tensor.is_nested or tensor.untyped_storage().device.type != "npu":
        return _torch_reduce_tensor(tensor)
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does not support "
            "crossing process boundaries.  If you just want to transfer the data, call detach() on the tensor "
            "before serializing (e.g., putting it on the queue)."
        )
    torch.utils.hooks.warn_if_has_hooks(tensor)
    storage = tensor._typed_storage()
    device, handle, nbytes, offset_bytes, counter, counter_offset, event, sync = storage._share_npu_()
    shared_cache[handle] = StorageWeakRef(storage)
    return rebuild_npu_tensor, (
        type(tensor),
        tensor.size(),
        tensor.stride(),
        tensor.storage_offset(),
        type(storage),
        tensor.dtype,
        device,
        handle,
        nbytes,
        offset_bytes,
        tensor.requires_grad,
        counter,
        counter_offset,
        event,  # npu work is complete when issued here: nothing to wait for
        sync,
    )


def _npu_reduce_storage(storage):
    """A bare storage: npu ones are refused as torch_npu refuses them; CPU ones are shared as torch shares
    them (by file name or by file descriptor, as the sharing strategy says). torch_npu writes this CPU branch
    out with the rebuild functions this module imports, and its tests check exactly that (they replace
    torch's module-level rebuild functions), so it is not delegated to torch.multiprocessing's reduce_storage."""
    if storage.device.type == "npu":
        raise RuntimeError("Cannot pickle NPU storage; try pickling a NPU tensor instead")
    if torch.multiprocessing.get_sharing_strategy() == "file_system":
        metadata = storage._share_filename_cpu_()
        key, rebuild = metadata[1], rebuild_storage_filename
        if isinstance(storage, torch.TypedStorage):
            metadata += (storage.dtype,)
        storage._shared_incref()
    elif storage.size() == 0:  # an empty storage cannot be mapped
        return rebuild_storage_empty, (type(storage),)
    else:
        fd, size = storage._share_fd_cpu_()
        key, rebuild = fd_id(fd), rebuild_storage_fd
        metadata = (multiprocessing.reduction.DupFd(fd), size)
    shared_cache[key] = StorageWeakRef(storage)
    return rebuild, (type(storage), *metadata)


def _add_storage_methods():
    """torch_npu's storage methods for sharing (the patch registry calls this once)."""
    if getattr(torch.UntypedStorage, "_share_npu_", None) is _share_npu_:
        return False
    torch.UntypedStorage._share_npu_ = _share_npu_
    torch.UntypedStorage._new_shared_npu = staticmethod(_new_shared_npu)
    torch.UntypedStorage._release_ipc_counter_npu = staticmethod(_release_ipc_counter_npu)
    torch.TypedStorage._share_npu_ = lambda self: self._untyped_storage._share_npu_()
    torch.TypedStorage._new_shared_npu = staticmethod(_new_shared_npu)
    torch.TypedStorage._release_ipc_counter_npu = staticmethod(_release_ipc_counter_npu)
    return True


def _add_reductions_methods():
    """Installs the npu reductions in torch.multiprocessing (the patch registry calls this once)."""
    if torch_reductions.reduce_tensor is _npu_reduce_tensor:
        return False
    multiprocessing.reduction.register(torch.npu.Event, _npu_reduce_event)
    torch_reductions.reduce_event = _npu_reduce_event
    torch_reductions.reduce_tensor = _npu_reduce_tensor
    torch_reductions.reduce_storage = _npu_reduce_storage
    torch_reductions.init_reductions()
    return True
