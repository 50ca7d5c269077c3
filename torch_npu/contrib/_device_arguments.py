"""Rewriting CUDA device arguments to npu ones, as transfer_to_npu applies it to torch's API.

Only whole device strings ("cuda", "cuda:N"), torch.device("cuda...") values, a bare int where the
argument is a device (`to`, `to_empty`), map_location dicts and the backend argument are rewritten:
never a file name, dict key or message that merely contains "cuda" or "nccl". Every rewrite is
counted (`patched_calls()`), which `vnpu run` reports as what a migration must address.
"""

import collections
import functools
import inspect
import re

import torch

__all__ = ["patched_calls"]

_calls = collections.Counter()
_DEVICE_KWARGS = ("device", "device_type", "map_location", "device_id")

# torch.cuda.is_available as PyTorch answers it on this machine, before transfer_to_npu makes it torch.npu's
original_cuda_is_available = torch.cuda.is_available


def patched_calls():
    """{API: number of calls whose CUDA arguments were rewritten to npu} since the import."""
    return dict(_calls)


# A device string, whole: "cuda" or "cuda:N" (never a file name, key or message that contains "cuda").
_CUDA_DEVICE = re.compile(r"cuda(:\d+)?")


def _npu_device(value, int_means_device):
    """value with CUDA devices replaced by npu ones (or value itself)."""
    if isinstance(value, str) and _CUDA_DEVICE.fullmatch(value):
        return "npu" + value[len("cuda") :]
    if isinstance(value, torch.device) and value.type == "cuda":
        return torch.device("npu", value.index) if value.index is not None else torch.device("npu")
    if int_means_device and isinstance(value, int) and not isinstance(value, bool):
        return f"npu:{value}"
    if isinstance(value, dict):
        return {_npu_device(k, False): _npu_device(v, False) for k, v in value.items()}
    return value


def _rewrite(args, kwargs, int_positional):
    new_args = tuple(_npu_device(a, int_positional) for a in args)
    new_kwargs = dict(kwargs)
    for key in _DEVICE_KWARGS:
        if key in new_kwargs:
            new_kwargs[key] = _npu_device(new_kwargs[key], True)
    if isinstance(new_kwargs.get("device_ids"), (list, tuple)):
        new_kwargs["device_ids"] = [_npu_device(d, False) for d in new_kwargs["device_ids"]]
    changed = any(a is not b for a, b in zip(new_args, args)) or any(new_kwargs[k] is not kwargs[k] for k in kwargs)
    return new_args, new_kwargs, changed


def _device_rewriting(fn, name, int_positional=False, count_every_call=False):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args, kwargs, changed = _rewrite(args, kwargs, int_positional)
        if changed or count_every_call:
            _calls[name] += 1
        return fn(*args, **kwargs)

    wrapper.__vnpu_transfer__ = True
    return wrapper


def _wrap(owner, attr, label, int_positional=False, count_every_call=False):
    fn = getattr(owner, attr, None)
    if fn is None or getattr(fn, "__vnpu_transfer__", False):
        return
    setattr(owner, attr, _device_rewriting(fn, label, int_positional, count_every_call))


def _wrap_init(cls, label):
    original = cls.__init__
    if getattr(original, "__vnpu_transfer__", False):
        return
    cls.__init__ = _device_rewriting(original, label)


def _counted(fn, label):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _calls[label] += 1
        return fn(*args, **kwargs)

    wrapper.__vnpu_transfer__ = True
    return wrapper


def _hccl_backend(backend):
    """A backend string with nccl -> hccl and cuda -> npu in its parts ("nccl", "cpu:gloo,cuda:nccl")."""
    if not isinstance(backend, str):
        return backend
    parts = []
    for part in backend.split(","):
        device, _, name = part.rpartition(":")
        device = "npu" if device == "cuda" else device
        name = "hccl" if name == "nccl" else name
        parts.append(f"{device}:{name}" if device else name)
    return ",".join(parts)


def _device_id(value):
    """init_process_group's device_id: a CUDA torch.device or device string means the npu one."""
    rewritten = _npu_device(value, False)
    return torch.device(rewritten) if isinstance(rewritten, str) else rewritten


def _hccl_instead_of_nccl(fn, label):
    """Only the backend argument (and a device_id) is rewritten; init_method, group names... are left as they are."""
    parameters = list(inspect.signature(fn).parameters)
    backend_position = parameters.index("backend")

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if len(args) > backend_position:
            backend = _hccl_backend(args[backend_position])
            changed = backend != args[backend_position]
            args = (*args[:backend_position], backend, *args[backend_position + 1 :])
        else:
            backend = _hccl_backend(kwargs.get("backend"))
            changed = backend != kwargs.get("backend")
            if "backend" in kwargs:
                kwargs["backend"] = backend
        if kwargs.get("device_id") is not None:
            device_id = _device_id(kwargs["device_id"])
            changed = changed or device_id is not kwargs["device_id"]
            kwargs["device_id"] = device_id
        if changed:
            _calls[label] += 1
        return fn(*args, **kwargs)

    wrapper.__vnpu_transfer__ = True
    return wrapper
