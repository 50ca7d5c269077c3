"""``import torch_npu.contrib.transfer_to_npu`` (or ``TORCH_TRANSFER_TO_NPU=1``): CUDA code runs on npu unchanged.

The documented patch set of torch_npu's transfer_to_npu:
- ``torch.cuda`` takes every name of ``torch.npu`` (is_available, device_count, set_device, Stream, Event,
  memory_*, ...), ``torch.cuda.amp`` / ``torch.cuda.random`` those of ``torch.npu.amp`` / ``random``;
  ``torch.cuda.CUDAGraph`` is ``torch.npu.NPUGraph``;
- device arguments are rewritten ('cuda' / 'cuda:1' / torch.device('cuda') -> npu; for ``to`` and
  ``to_empty`` a bare int is 'npu:<i>'; keyword device, device_type, map_location, device_id always;
  device_ids lists) in the factory functions, Tensor.new_* / to / pin_memory, Module.to / to_empty,
  torch.load, autocast, GradScaler, torch.Generator, the torch.cuda functions taking a device, DDP;
- ``Tensor.cuda`` / ``Module.cuda`` are the npu ones, ``Tensor.is_cuda`` is ``is_npu``;
- distributed: backend 'nccl' becomes 'hccl' in init_process_group / new_group, is_nccl_available is
  is_hccl_available;
- ``ProfilerActivity.CUDA`` in torch.profiler.profile(activities=...) profiles the npu.

Deliberate differences from torch_npu's version (its known regressions):
- ``torch.jit.script`` / ``script_method`` keep working (torch_npu turns them into the identity);
- library probes stay truthful about CUDA itself: ``torch.version.cuda`` stays None,
  ``torch.backends.cudnn.is_available()`` False and triton detection untouched, so libraries that pick a
  CUDA-only fast path by probing for it keep their portable path (torch_npu forces some of these);
- every rewrite and every call through ``torch.cuda`` is counted (``patched_calls()``), which `vnpu run`
  reports as the CUDA-only calls a migration must address.
"""
import collections
import functools
import inspect
import os
import warnings

import torch

import torch_npu

__all__ = ["patched_calls"]

_calls = collections.Counter()
_DEVICE_KWARGS = ("device", "device_type", "map_location", "device_id")

_TORCH_FACTORIES = (
    "logspace", "randint", "hann_window", "rand", "full_like", "ones_like", "rand_like", "randperm", "arange",
    "frombuffer", "normal", "_empty_per_channel_affine_quantized", "empty_strided", "empty_like", "scalar_tensor",
    "tril_indices", "bartlett_window", "ones", "sparse_coo_tensor", "randn", "kaiser_window", "tensor",
    "triu_indices", "as_tensor", "zeros", "randint_like", "full", "eye", "_sparse_csr_tensor_unsafe", "empty",
    "_sparse_coo_tensor_unsafe", "blackman_window", "zeros_like", "range", "sparse_csr_tensor", "randn_like",
    "from_file", "_empty_affine_quantized", "linspace", "hamming_window", "empty_quantized", "_pin_memory", "load",
    "set_default_device", "get_device_module", "sparse_compressed_tensor",
)
_TENSOR_METHODS = ("new_empty", "new_empty_strided", "new_full", "new_ones", "new_tensor", "new_zeros", "to",
                   "pin_memory")
_CUDA_FUNCTIONS = (
    "get_device_properties", "get_device_name", "get_device_capability", "list_gpu_processes", "set_device",
    "synchronize", "mem_get_info", "memory_stats", "memory_summary", "memory_allocated", "max_memory_allocated",
    "reset_max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_max_memory_cached",
    "reset_peak_memory_stats", "default_stream", "can_device_access_peer", "current_stream", "utilization",
    "set_per_process_memory_fraction", "caching_allocator_alloc",
)


def patched_calls():
    """{API: number of calls whose CUDA arguments were rewritten to npu} since the import."""
    return dict(_calls)


def _npu_device(value, int_means_device):
    """value with CUDA devices replaced by npu ones (or value itself)."""
    if isinstance(value, str) and "cuda" in value:
        return value.replace("cuda", "npu")
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
    changed = any(a is not b for a, b in zip(new_args, args)) or any(
        new_kwargs[k] is not kwargs[k] for k in kwargs)
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


def _alias_cuda_module():
    npu = torch_npu.npu
    for name in npu.__all__:
        value = getattr(npu, name)
        if inspect.isfunction(value) or inspect.isbuiltin(value):  # calls through torch.cuda are counted
            value = _device_rewriting(value, f"torch.cuda.{name}", count_every_call=True)
        setattr(torch.cuda, name, value)
    for cuda_sub, npu_sub in ((torch.cuda.amp, npu.amp), (torch.cuda.random, npu.random)):
        for name in getattr(npu_sub, "__all__", ()):
            setattr(cuda_sub, name, getattr(npu_sub, name))
    torch.cuda.CUDAGraph = npu.NPUGraph
    torch.cuda.graph = npu.graph
    for name in _CUDA_FUNCTIONS:
        _wrap(torch.cuda, name, f"torch.cuda.{name}", count_every_call=True)
    _wrap_init(torch.cuda.device, "torch.cuda.device")


def _counted(fn, label):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _calls[label] += 1
        return fn(*args, **kwargs)

    wrapper.__vnpu_transfer__ = True
    return wrapper


def _patch_tensors_and_modules():
    for name in _TORCH_FACTORIES:
        _wrap(torch, name, f"torch.{name}")
    for name in _TENSOR_METHODS:
        _wrap(torch.Tensor, name, f"Tensor.{name}", int_positional=name == "to")
    for name in ("to", "to_empty"):
        _wrap(torch.nn.Module, name, f"Module.{name}", int_positional=True)
    torch.Tensor.cuda = _counted(torch.Tensor.npu, "Tensor.cuda")
    torch.Tensor.is_cuda = torch.Tensor.is_npu
    torch.nn.Module.cuda = _counted(torch.nn.Module.npu, "Module.cuda")
    _wrap_init(torch.amp.autocast_mode.autocast, "torch.autocast")
    _wrap_init(torch.amp.GradScaler, "torch.amp.GradScaler")
    for name in ("fftfreq", "rfftfreq"):
        _wrap(torch.fft, name, f"torch.fft.{name}")


class _NpuGeneratorMeta(type(torch.Generator)):
    def __instancecheck__(cls, instance):
        return isinstance(instance, _ORIGINAL_GENERATOR)


_ORIGINAL_GENERATOR = torch.Generator


class _Generator(_ORIGINAL_GENERATOR, metaclass=_NpuGeneratorMeta):
    """torch.Generator(device='cuda') makes an npu generator; isinstance checks still see torch.Generator."""

    def __new__(cls, device="cpu"):
        new_device = _npu_device(device, True)
        if new_device is not device:
            _calls["torch.Generator"] += 1
        return _ORIGINAL_GENERATOR(device=new_device)


def _hccl_instead_of_nccl(fn, label):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = tuple(a.replace("nccl", "hccl").replace("cuda", "npu") if isinstance(a, str) else a for a in args)
        if isinstance(kwargs.get("backend"), str) and "nccl" in kwargs["backend"]:
            kwargs["backend"] = kwargs["backend"].replace("nccl", "hccl")
            _calls[label] += 1
        return fn(*args, **kwargs)

    wrapper.__vnpu_transfer__ = True
    return wrapper


def _patch_distributed():
    import torch.distributed as dist

    if not dist.is_available():
        return
    for name in ("init_process_group", "new_group"):
        fn = getattr(dist, name)
        if not getattr(fn, "__vnpu_transfer__", False):
            setattr(dist, name, _hccl_instead_of_nccl(fn, f"torch.distributed.{name}"))
    if hasattr(dist, "is_hccl_available"):
        dist.is_nccl_available = dist.is_hccl_available
    from torch.nn.parallel import DistributedDataParallel

    _wrap_init(DistributedDataParallel, "DistributedDataParallel")


def _patch_profiler():
    profile_cls = torch.profiler.profile
    original = profile_cls.__init__
    if getattr(original, "__vnpu_transfer__", False):
        return

    @functools.wraps(original)
    def init(self, *args, activities=None, **kwargs):
        if activities is not None:
            cuda = torch.profiler.ProfilerActivity.CUDA
            if cuda in activities:
                _calls["ProfilerActivity.CUDA"] += 1
                activities = [torch.profiler.ProfilerActivity.PrivateUse1 if a == cuda else a for a in activities]
        original(self, *args, activities=activities, **kwargs)

    init.__vnpu_transfer__ = True
    profile_cls.__init__ = init


def _apply():
    _alias_cuda_module()
    _patch_tensors_and_modules()
    torch.Generator = _Generator
    _patch_distributed()
    _patch_profiler()
    if os.environ.get("RANK", "0") == "0":
        warnings.warn("torch_npu.contrib.transfer_to_npu: torch.cuda, device arguments 'cuda', Tensor/Module.cuda, "
                      "torch.Generator, autocast, GradScaler, DDP and the nccl backend now mean the npu "
                      "(torch.jit.script is kept)", ImportWarning)


_apply()
