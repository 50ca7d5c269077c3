"""The helpers torch_npu's transfer_to_npu module exposes, which migration code and tests call by name.

They use vnpu's rewriting rules: only whole device strings ("cuda", "cuda:N") and the backend argument
are rewritten, never a file name or a message that merely contains "cuda" or "nccl".
"""

import functools
import json
import logging
import os

import torch

from torch_npu.contrib._device_arguments import _device_rewriting, _hccl_instead_of_nccl, _npu_device

_logger = logging.getLogger("torch_npu.contrib.transfer_to_npu")
_MAX_CONFIG_BYTES = 10 * 1024**2
_MAX_NAME_LENGTH = 200


def _check_input_file_valid(file_path):
    """True for a readable regular file that is not a symbolic link, with a name of at most 200
    characters and at most 10 MiB of content (torch_npu's checks for its API configuration file)."""
    if os.path.islink(os.path.abspath(file_path)):
        return False
    path = os.path.realpath(file_path)
    return (
        os.path.isfile(path)
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
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _replace_cuda_to_npu_in_dict(device_dict):
    """A copy of a map_location-style dict with its CUDA device keys and values made npu ones."""
    return {_npu_device(k, False): _npu_device(v, False) for k, v in device_dict.items()}


def _wrapper_cuda(fn):
    """fn with its CUDA device arguments (positional, device=/map_location=/device_ids=...) made npu."""
    return _device_rewriting(
        fn, getattr(fn, "__qualname__", repr(fn)), int_positional=fn.__name__ in ("to", "to_empty")
    )


def _wrapper_hccl(fn):
    """fn (init_process_group-like) with an nccl backend argument made hccl."""
    return _hccl_instead_of_nccl(fn, getattr(fn, "__qualname__", repr(fn)))


def _wrapper_profiler(fn):
    """fn (torch.profiler.profile-like) without an experimental_config that is not torch_npu's: CUDA code's
    config cannot configure the npu profiler, so it is dropped with a warning."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import torch_npu

        config = kwargs.get("experimental_config")
        if "experimental_config" in kwargs and not isinstance(config, torch_npu.profiler._ExperimentalConfig):
            _logger.warning(
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
