"""Saving and loading npu tensors: torch.load as torch_npu exposes it, and save_async, which copies
the tensors to the host at once and writes the file on a background thread."""

import copy
import pickle
import threading
from typing import Any

import torch

__all__ = ["load", "save_async"]

_pending = []
_pending_lock = threading.Lock()


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """torch.load; npu tensors in the file come back on npu (or where map_location says)."""
    return torch.load(
        f,
        map_location=map_location,
        pickle_module=pickle_module,
        weights_only=weights_only,
        mmap=mmap,
        **pickle_load_args,
    )


def _to_host(obj):
    """A copy of obj whose tensors are host copies that keep their device for the file."""

    def snapshot(t):
        return t.detach().cpu().clone(), t.device

    if isinstance(obj, torch.Tensor):
        return _HostTensor(*snapshot(obj))
    return _map(
        obj, _to_host, lambda o: _to_host(o.state_dict()) if isinstance(o, torch.nn.Module) else copy.deepcopy(o)
    )


class _HostTensor:
    def __init__(self, data, device):
        self.data, self.device = data, device


def _restore(obj):
    if isinstance(obj, _HostTensor):
        return obj.data.to(obj.device)
    return _map(obj, _restore, lambda o: o)


def _map(obj, fn, leaf):
    """fn applied inside dicts, lists, tuples and named tuples; leaf(obj) for anything else."""
    if isinstance(obj, dict):
        return type(obj)((k, fn(v)) for k, v in obj.items())
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[fn(v) for v in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(fn(v) for v in obj)
    return leaf(obj)


def save_async(
    obj: object,
    f,
    pickle_module: Any = pickle,
    pickle_protocol: int = 2,
    _use_new_zipfile_serialization: bool = True,
    _disable_byteorder_record: bool = False,
    model: torch.nn.Module = None,
) -> None:
    """torch.save on a background thread. The values are taken when save_async is called, so the
    caller may keep training; `model` (optional) waits for the write before its next forward."""
    snapshot = _to_host(obj)

    def write():
        torch.save(
            _restore(snapshot),
            f,
            pickle_module=pickle_module,
            pickle_protocol=pickle_protocol,
            _use_new_zipfile_serialization=_use_new_zipfile_serialization,
            _disable_byteorder_record=_disable_byteorder_record,
        )

    thread = threading.Thread(target=write, name="torch_npu-save_async", daemon=False)
    with _pending_lock:
        _pending.append(thread)
    thread.start()
    if model is not None:

        def wait_for_save(module, args):
            thread.join()
            handle.remove()

        handle = model.register_forward_pre_hook(wait_for_save)


def _wait_for_saves():
    """Join every save_async thread started so far (tests, interpreter exit)."""
    with _pending_lock:
        threads = list(_pending)
        _pending.clear()
    for t in threads:
        t.join()
