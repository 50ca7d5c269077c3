"""The helpers torch_npu's transfer_to_npu module exposes, which migration code and tests call by name.

_wrapper_cuda and _wrapper_hccl use vnpu's rewriting rules: only whole device strings ("cuda", "cuda:N") and
backend names are rewritten. _replace_cuda_to_npu_in_dict is torch_npu's plain substring replacement.
"""

import functools
import logging

import torch

from torch_npu.contrib._device_arguments import _device_rewriting, _hccl_backend, _hccl_instead_of_nccl


def _replace_cuda_to_npu_in_dict(device_dict):
    """A copy of the dict with "cuda" replaced by "npu" in its string keys and values, as torch_npu's helper does
    ({"cuda_version": "cuda:0"} -> {"npu_version": "npu:0"}); other keys and values are kept."""

    def replaced(item):
        return item.replace("cuda", "npu") if isinstance(item, str) else item

    return {replaced(k): replaced(v) for k, v in device_dict.items()}


def _wrapper_cuda(fn):
    """fn with its CUDA device arguments (positional, device=/map_location=/device_ids=...) made npu."""
    return _device_rewriting(
        fn, getattr(fn, "__qualname__", repr(fn)), int_positional=fn.__name__ in ("to", "to_empty")
    )


def _wrapper_hccl(fn):
    """fn (init_process_group-like) with an nccl backend made hccl ("nccl" -> "hccl", "cuda:nccl" -> "npu:hccl") and a
    CUDA device_id made npu. For a function without a backend parameter, every string positional argument and
    the backend keyword are rewritten."""
    try:
        return _hccl_instead_of_nccl(fn, getattr(fn, "__qualname__", repr(fn)))
    except ValueError:  # no `backend` parameter: (*args, **kwargs)
        pass

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = tuple(_hccl_backend(a) if isinstance(a, str) else a for a in args)
        if "backend" in kwargs:
            kwargs["backend"] = _hccl_backend(kwargs["backend"])
        return fn(*args, **kwargs)

    return wrapper


def _wrapper_profiler(fn):
    """fn (torch.profiler.profile-like) without an experimental_config that is not torch_npu's: CUDA code's
    config cannot configure the npu profiler, so it is dropped with a warning."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import torch_npu

        config = kwargs.get("experimental_config")
        if "experimental_config" in kwargs and not isinstance(config, torch_npu.profiler._ExperimentalConfig):
            logging.warning(
                "The parameter experimental_config of torch.profiler.profile has been deleted by the tool because "
                "it can only be used in cuda, please manually modify the code and use the experimental_config "
                "parameter adapted to npu."
            )
            del kwargs["experimental_config"]
        return fn(*args, **kwargs)

    return wrapper


def _wrapper_libraries_func(fn):
    """fn run with the real torch.cuda.is_available (False on this machine): libraries that pick a code
    path by it keep their CPU/npu path while transfer_to_npu answers True for everything else."""
    from torch_npu.contrib._device_arguments import original_cuda_is_available

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        patched = torch.cuda.is_available
        torch.cuda.is_available = original_cuda_is_available
        try:
            return fn(*args, **kwargs)
        finally:
            torch.cuda.is_available = patched

    return wrapper


def _del_nccl_device_backend_map():
    """Drop torch.distributed's cuda -> nccl default, so an unspecified backend means hccl for npu."""
    import torch.distributed as dist

    if dist.is_available():
        dist.Backend.default_device_backend_map.pop("cuda", None)
