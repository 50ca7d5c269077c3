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

import functools
import inspect
import json
import os
import warnings

import torch

import torch_npu
from torch_npu.contrib._device_arguments import (
    _calls,
    _counted,
    _device_rewriting,
    _hccl_instead_of_nccl,
    _rewrite,
    _wrap,
    _wrap_init,
    patched_calls,
)
from torch_npu.contrib._transfer_helpers import (  # noqa: F401  (torch_npu's helper names)
    _del_nccl_device_backend_map,
    _replace_cuda_to_npu_in_dict,
    _wrapper_cuda,
    _wrapper_hccl,
    _wrapper_libraries_func,
    _wrapper_profiler,
)

__all__ = ["patched_calls"]

_MAX_CONFIG_BYTES = 10 * 1024**2
_MAX_NAME_LENGTH = 200


def _check_input_file_valid(file_path):
    """True for a readable existing path that is not a symbolic link, with a name of at most 200 characters and
    at most 10 MiB of content (torch_npu's checks for its API configuration file)."""
    if os.path.islink(os.path.abspath(file_path)):
        return False
    path = os.path.realpath(file_path)
    return (
        os.path.exists(path)
        and os.access(path, os.R_OK)
        and len(os.path.basename(path)) <= _MAX_NAME_LENGTH
        and os.path.getsize(path) <= _MAX_CONFIG_BYTES
    )


def _load_json_file(file_path):
    """The JSON object in file_path, or {} when the file is not valid, not JSON or not an object."""
    if not _check_input_file_valid(file_path):
        return {}
    try:
        with open(file_path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


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


def alias_cuda_module():
    """torch.cuda takes torch.npu's names (calls counted), CUDAGraph/graph/DoubleTensor/memory history,
    torch._C._host_emptyCache."""
    npu = torch_npu.npu
    for name in npu.__all__:
        value = getattr(npu, name)
        if inspect.isfunction(value) or inspect.isbuiltin(value):  # calls through torch.cuda are counted
            value = _device_rewriting(value, f"torch.cuda.{name}", count_every_call=True)
        setattr(torch.cuda, name, value)
    for cuda_sub, npu_sub in ((torch.cuda.amp, npu.amp), (torch.cuda.random, npu.random)):
        for name in getattr(npu_sub, "__all__", ()):
            setattr(cuda_sub, name, getattr(npu_sub, name))
    # torch.cuda.default_generators is torch.npu's (filled when the device initialises)
    npu._lazy_call(lambda: setattr(torch.cuda, "default_generators", npu.default_generators))
    torch.cuda.CUDAGraph = npu.NPUGraph
    torch.cuda.graph = npu.graph
    torch.cuda.DoubleTensor = npu.FloatTensor  # as torch_npu's transfer_to_npu does
    for name in ("_record_memory_history", "_snapshot", "_dump_snapshot"):
        setattr(torch.cuda.memory, name, getattr(npu.memory, name))
    torch._C._host_emptyCache = torch_npu._C._npu_hostEmptyCache  # CUDA builds bind it; frees cached pinned memory
    for name in _CUDA_FUNCTIONS:
        _wrap(torch.cuda, name, f"torch.cuda.{name}", count_every_call=True)
    _wrap_init(torch.cuda.device, "torch.cuda.device")
    return True


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


def cuda_kernels_and_extensions_mean_npu():
    """profiler_util.Kernel(name, "cuda", duration) reports npu; cpp_extension.include_paths("cuda") gives
    the paths an npu extension builds with (PyTorch's and torch_npu's headers) instead of CUDA's."""
    from torch.autograd import profiler_util
    from torch.utils import cpp_extension

    from torch_npu.utils.cpp_extension import _include_paths

    kernel = profiler_util.Kernel
    if getattr(kernel, "__vnpu_transfer__", False):
        return False

    class Kernel(kernel):
        __slots__ = ()
        __vnpu_transfer__ = True

        def __new__(cls, name, device, duration):
            return super().__new__(cls, name, "npu" if device == "cuda" else device, duration)

    profiler_util.Kernel = Kernel
    original_include_paths = cpp_extension.include_paths

    @functools.wraps(original_include_paths)
    def include_paths(device_type="cpu", *args, **kwargs):
        if device_type in ("cuda", "npu"):
            _calls["torch.utils.cpp_extension.include_paths"] += 1
            return original_include_paths("cpu", *args, **kwargs) + _include_paths()
        return original_include_paths(device_type, *args, **kwargs)

    cpp_extension.include_paths = include_paths
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
