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
import os

import torch
import torch.multiprocessing.reductions as torch_reductions
from torch.multiprocessing.reductions import StorageWeakRef, fd_id, shared_cache, storage_from_cache

import torch_npu

_torch_reduce_tensor = torch_reductions.reduce_tensor
_torch_reduce_storage = torch_reductions.reduce_storage


def rebuild_npu_event(device, handle):
    return torch.npu.Event.from_ipc_handle(device, handle)


def _npu_reduce_event(event):
    return rebuild_npu_event, (event.device, event.ipc_handle())


def _open_storage(storage_device, storage_handle, storage_size_bytes):
    if storage_handle is None or storage_size_bytes == 0:
        return torch.UntypedStorage(0, device=storage_device)
    fd = storage_handle.detach()
    cached = storage_from_cache(torch.UntypedStorage, fd_id(fd))
    if cached is not None:
        os.close(fd)
        return cached
    torch_npu.npu._lazy_init()
    index = storage_device.index if storage_device.index is not None else torch.npu.current_device()
    storage = torch_npu._C._open_shared_npu_storage(fd, storage_size_bytes, index).untyped_storage()
    shared_cache[fd_id(fd)] = StorageWeakRef(storage)
    return storage


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
    storage = _open_storage(storage_device, storage_handle, storage_size_bytes)
    typed = torch.storage.TypedStorage(wrap_storage=storage, dtype=dtype, _internal=True)
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
    fd, nbytes = torch_npu._C._share_npu_storage(tensor)
    shared_cache[fd_id(fd)] = StorageWeakRef(storage)
    return rebuild_npu_tensor, (
        type(tensor),
        tensor.size(),
        tensor.stride(),
        tensor.storage_offset(),
        type(storage),
        tensor.dtype,
        tensor.device,
        multiprocessing.reduction.DupFd(fd),  # the handle: the storage's memfd
        nbytes,
        0,  # the storage starts its mapping
        tensor.requires_grad,
        None,  # no reference counter: the mapping lives while any process maps it
        None,
        None,  # npu work is complete when issued here: nothing to wait for
        False,
    )


def _npu_reduce_storage(storage):
    if storage.device.type == "npu":
        raise RuntimeError("Cannot pickle NPU storage; try pickling a NPU tensor instead")
    return _torch_reduce_storage(storage)


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
