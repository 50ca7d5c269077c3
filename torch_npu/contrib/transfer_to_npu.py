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
- also: torch.UntypedStorage(..., device='cuda'), `with torch.device('cuda')`, torch.Event, the memory
  history/snapshot functions of torch.cuda.memory, torch.cuda.DoubleTensor, TypedStorage.is_cuda;
- distributed: backend 'nccl' becomes 'hccl' in init_process_group / new_group, is_nccl_available is
  is_hccl_available, ProcessGroupNCCL is ProcessGroupHCCL, 'cuda' leaves the default device-backend map;
  device arguments of DDP, FSDP, DeviceMesh / init_device_mesh and PipelineStage are rewritten;
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
import re
import warnings

import torch

import torch_npu

__all__ = ["patched_calls"]

_calls = collections.Counter()
_DEVICE_KWARGS = ("device", "device_type", "map_location", "device_id")

_TORCH_FACTORIES = (
    "logspace",
    "randint",
    "hann_window",
    "rand",
    "full_like",
    "ones_like",
    "rand_like",
    "randperm",
    "arange",
    "frombuffer",
    "normal",
    "_empty_per_channel_affine_quantized",
    "empty_strided",
    "empty_like",
    "scalar_tensor",
    "tril_indices",
    "bartlett_window",
    "ones",
    "sparse_coo_tensor",
    "randn",
    "kaiser_window",
    "tensor",
    "triu_indices",
    "as_tensor",
    "zeros",
    "randint_like",
    "full",
    "eye",
    "_sparse_csr_tensor_unsafe",
    "empty",
    "_sparse_coo_tensor_unsafe",
    "blackman_window",
    "zeros_like",
    "range",
    "sparse_csr_tensor",
    "randn_like",
    "from_file",
    "_empty_affine_quantized",
    "linspace",
    "hamming_window",
    "empty_quantized",
    "_pin_memory",
    "load",
    "set_default_device",
    "get_device_module",
    "sparse_compressed_tensor",
)
_TENSOR_METHODS = (
    "new_empty",
    "new_empty_strided",
    "new_full",
    "new_ones",
    "new_tensor",
    "new_zeros",
    "to",
    "pin_memory",
)
_CUDA_FUNCTIONS = (
    "get_device_properties",
    "get_device_name",
    "get_device_capability",
    "list_gpu_processes",
    "set_device",
    "synchronize",
    "mem_get_info",
    "memory_stats",
    "memory_summary",
    "memory_allocated",
    "max_memory_allocated",
    "reset_max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_max_memory_cached",
    "reset_peak_memory_stats",
    "default_stream",
    "can_device_access_peer",
    "current_stream",
    "utilization",
    "set_per_process_memory_fraction",
    "caching_allocator_alloc",
)


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


def alias_cuda_module():
    """torch.cuda takes torch.npu's names (calls counted), CUDAGraph/graph/DoubleTensor/memory history."""
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
    torch.cuda.DoubleTensor = npu.FloatTensor  # as torch_npu's transfer_to_npu does
    for name in ("_record_memory_history", "_snapshot", "_dump_snapshot"):
        setattr(torch.cuda.memory, name, getattr(npu.memory, name))
    for name in _CUDA_FUNCTIONS:
        _wrap(torch.cuda, name, f"torch.cuda.{name}", count_every_call=True)
    _wrap_init(torch.cuda.device, "torch.cuda.device")
    return True


def _counted(fn, label):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _calls[label] += 1
        return fn(*args, **kwargs)

    wrapper.__vnpu_transfer__ = True
    return wrapper


def device_arguments_of_tensors_and_modules():
    """Factories, Tensor/Module methods, storages, `with torch.device`, autocast, GradScaler, fft: cuda -> npu."""
    from torch.utils._device import DeviceContext, _device_constructors

    _device_constructors()  # cache the real factories first: `with torch.device(...)` matches on them
    for name in _TORCH_FACTORIES:
        _wrap(torch, name, f"torch.{name}")
    for name in _TENSOR_METHODS:
        _wrap(torch.Tensor, name, f"Tensor.{name}", int_positional=name == "to")
    for name in ("to", "to_empty"):
        _wrap(torch.nn.Module, name, f"Module.{name}", int_positional=True)
    torch.Tensor.cuda = _counted(torch.Tensor.npu, "Tensor.cuda")
    torch.Tensor.is_cuda = torch.Tensor.is_npu
    torch.TypedStorage.is_cuda = property(lambda self: self.device.type == "npu")
    torch.nn.Module.cuda = _counted(torch.nn.Module.npu, "Module.cuda")
    allowed = torch.nn.parameter.UninitializedTensorMixin._allowed_methods
    allowed[:] = [torch.Tensor.to if getattr(m, "__name__", "") == "to" else m for m in allowed]
    original_new = torch.UntypedStorage.__new__
    if not getattr(original_new, "__vnpu_transfer__", False):
        torch.UntypedStorage.__new__ = staticmethod(_device_rewriting(original_new, "torch.UntypedStorage"))
    _wrap_init(DeviceContext, "with torch.device")
    torch._utils._get_available_device_type = lambda: "npu"
    _wrap_init(torch.amp.autocast_mode.autocast, "torch.autocast")
    _wrap_init(torch.amp.GradScaler, "torch.amp.GradScaler")
    for name in ("fftfreq", "rfftfreq"):
        _wrap(torch.fft, name, f"torch.fft.{name}")
    return True


def device_classes():
    """torch.Generator(device="cuda") and torch.Event(device="cuda") make npu ones (isinstance still holds)."""
    if isinstance(torch.Generator, type) and type(torch.Generator).__name__ == "Meta":
        return False
    torch.Generator = _device_class(torch.Generator, "torch.Generator")
    torch.Event = _device_class(torch.Event, "torch.Event")
    return True


def _device_class(original, label):
    """A stand-in for class `original` whose device argument is rewritten; instances are `original`'s
    own, and isinstance(x, stand-in) is isinstance(x, original)."""

    class Meta(type(original)):
        def __instancecheck__(cls, instance):
            return isinstance(instance, original)

        def __subclasscheck__(cls, subclass):
            return issubclass(subclass, original)

    def __new__(cls, *args, **kwargs):
        args, kwargs, changed = _rewrite(args, kwargs, int_positional=False)
        if changed:
            _calls[label] += 1
        return original(*args, **kwargs)

    return Meta(
        original.__name__,
        (original,),
        {"__new__": __new__, "__module__": original.__module__, "__doc__": original.__doc__},
    )


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


def _hccl_instead_of_nccl(fn, label):
    """Only the backend argument is rewritten (init_method, group names... are left as they are)."""
    backend_position = list(inspect.signature(fn).parameters).index("backend")

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
        if changed:
            _calls[label] += 1
        return fn(*args, **kwargs)

    wrapper.__vnpu_transfer__ = True
    return wrapper


def nccl_means_hccl():
    """The nccl backend, ProcessGroupNCCL and the device arguments of DDP/FSDP/DeviceMesh/PipelineStage mean npu."""
    import torch.distributed as dist

    if not dist.is_available():
        return False
    for name in ("init_process_group", "new_group"):
        fn = getattr(dist, name)
        if not getattr(fn, "__vnpu_transfer__", False):
            setattr(dist, name, _hccl_instead_of_nccl(fn, f"torch.distributed.{name}"))
    from torch.distributed import distributed_c10d
    from torch.distributed.device_mesh import DeviceMesh
    from torch.nn.parallel import DistributedDataParallel

    from torch_npu.distributed import ProcessGroupHCCL, is_hccl_available

    dist.is_nccl_available = distributed_c10d.is_nccl_available = is_hccl_available
    dist.ProcessGroupNCCL = distributed_c10d.ProcessGroupNCCL = ProcessGroupHCCL
    _wrap_init(DistributedDataParallel, "DistributedDataParallel")
    _wrap_init(DeviceMesh, "DeviceMesh")
    _wrap(torch.distributed.device_mesh, "init_device_mesh", "init_device_mesh")
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
        from torch.distributed.pipelining import PipelineStage
    except ImportError:  # builds without FSDP / pipelining
        return True
    _wrap_init(FullyShardedDataParallel, "FullyShardedDataParallel")
    _wrap_init(PipelineStage, "PipelineStage")
    dist.Backend.default_device_backend_map.pop("cuda", None)
    return True


def cuda_activity_means_npu():
    """ProfilerActivity.CUDA in torch.profiler.profile(activities=...) profiles the npu."""
    profile_cls = torch.profiler.profile
    original = profile_cls.__init__
    if getattr(original, "__vnpu_transfer__", False):
        return False

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
    return True


# The changes above are applied by the patch registry (torch_npu/_patches) the moment this module is imported.
if os.environ.get("RANK", "0") == "0":
    warnings.warn(
        "torch_npu.contrib.transfer_to_npu: torch.cuda, device arguments 'cuda', Tensor/Module.cuda, "
        "torch.Generator, autocast, GradScaler, DDP and the nccl backend now mean the npu "
        "(torch.jit.script is kept)",
        ImportWarning,
    )
