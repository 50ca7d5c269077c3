"""Device selection and device facts: set_device, device contexts, names and properties."""

import functools
import uuid
import warnings
from typing import Any

import torch

import torch_npu
from torch_npu import _C
from torch_npu.npu._capture_guard import refuse_during_capture
from torch_npu.utils._error_code import ErrCode, pta_error

_device_t = torch.device | str | int | None


def _get_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> int:
    """Index of an npu device given as torch.device, "npu:1", int or None (the current device
    when ``optional``). Raises ValueError for devices of another type."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if allow_cpu and device.type == "cpu":
            return -1
        if device.type != "npu":
            raise ValueError(f"Expected a npu device, but got: {device}")
        index = device.index
    else:
        index = device
    if index is None:
        if optional:
            return current_device()
        raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"Invalid device {device!r}: expected a torch.device, a string or an int")
    return index


def current_device() -> int:
    torch_npu.npu._lazy_init()
    return _C._current_device()


def set_device(device: _device_t) -> None:
    """Select the current NPU of this thread. Negative indices are ignored, as in torch.cuda."""
    index = _get_device_index(device, optional=True)
    if index >= 0:
        torch_npu.npu._lazy_init()
        _C._set_device(index)


class device:
    """Context manager that changes the current NPU (``with torch.npu.device(1): ...``)."""

    def __init__(self, device: Any):
        self.idx = _get_device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx == -1:
            return
        torch_npu.npu._lazy_init()
        self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, type: Any, value: Any, traceback: Any):
        if self.prev_idx != -1:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager selecting the device of a tensor (no-op for CPU tensors)."""

    def __init__(self, obj):
        idx = obj.get_device() if obj.device.type == "npu" else -1
        super().__init__(idx)


def _valid_index(device: _device_t) -> int:
    """The index of an existing device (initialising the NPU); raises "Invalid NPU device ordinal. ..."."""
    torch_npu.npu._lazy_init()
    index = _get_device_index(device, optional=True)
    _C._check_device(index)
    return index


def synchronize(device: _device_t = None) -> None:
    """Wait for all work on an NPU. Operators complete when they return, so this validates the device (and
    initialises it) and passes the runtime's device-synchronisation point (which the sanitizer follows)."""
    refuse_during_capture("torch.npu.synchronize()")
    torch._C._accelerator_synchronizeDevice(_valid_index(device))


def _checked_index(device: _device_t) -> int:
    torch_npu.npu._lazy_init()
    index = _get_device_index(device, optional=True)
    if index < 0 or index >= torch_npu.npu.device_count():
        raise AssertionError("Invalid device id")
    return index


def get_device_name(device_name: torch.device | str | int | None = None) -> str:
    """The SoC name (VNPU_SOC, default Ascend910B1); the same for every device."""
    _checked_index(device_name)
    return _C._soc_profile()["name"]


class _CUuuid:
    """Device UUID in the shape torch_npu returns (bytes list, 8-4-4-4-12 hex string)."""

    def __init__(self, value: uuid.UUID):
        self._value = value
        self.bytes = list(value.bytes)

    def __str__(self):
        return str(self._value)

    def __repr__(self):
        return str(self._value)

    def __eq__(self, other):
        return isinstance(other, _CUuuid) and other._value == self._value

    def __hash__(self):
        return hash(self._value)


class _NPUDeviceProperties:
    """What torch.npu.get_device_properties returns; the CUDA-only fields are None."""

    def __init__(self, index: int):
        soc = _C._soc_profile()
        physical = _C._physical_device_id(index)
        self.name = soc["name"]
        self.total_memory = _C._device_capacity()
        self.cube_core_num = soc["cube_core_num"]
        self.vector_core_num = soc["vector_core_num"]
        self.L2_cache_size = soc["L2_cache_size"]
        self.uuid = _CUuuid(uuid.uuid5(uuid.NAMESPACE_URL, f"vnpu://{soc['name']}/{physical}"))
        self.multi_processor_count = self.vector_core_num or self.cube_core_num
        for cuda_only in (
            "major",
            "minor",
            "is_multi_gpu_board",
            "is_integrated",
            "max_threads_per_multi_processor",
            "warp_size",
            "regs_per_multiprocessor",
            "gcnArchName",
        ):
            setattr(self, cuda_only, None)

    def __repr__(self):
        return (
            f"_NPUDeviceProperties(name='{self.name}', total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"cube_core_num={self.cube_core_num}, vector_core_num={self.vector_core_num}, "
            f"uuid={self.uuid}, L2_cache_size={self.L2_cache_size // (1024 * 1024)}MB)"
        )


def get_device_properties(device_name: torch.device | str | int | None = None) -> _NPUDeviceProperties:
    return _NPUDeviceProperties(_checked_index(device_name))


def get_device_capability(device: _device_t = None) -> tuple | None:
    """torch_npu returns None (NPUs have no CUDA compute capability) unless
    TORCH_NPU_DEVICE_CAPABILITY="major.minor" is set; like torch_npu, the device is not looked at."""
    import os

    value = os.environ.get("TORCH_NPU_DEVICE_CAPABILITY")
    parts = (value or "").split(".")
    if value is None or len(parts) != 2 or not all(p.isdigit() for p in parts):
        warnings.warn(
            "torch.npu.get_device_capability isn't implemented for NPU: it returns None. "
            'Set TORCH_NPU_DEVICE_CAPABILITY="major.minor" to return a value.'
        )
        return None
    warnings.warn(f"torch.npu.get_device_capability returns {value} from TORCH_NPU_DEVICE_CAPABILITY.")
    return int(parts[0]), int(parts[1])


def can_device_access_peer(device_id: int, peer_device_id: int) -> bool:
    """Whether device_id can read peer_device_id's memory: any two distinct devices (torch_npu's messages,
    spelling included, for an invalid id)."""
    torch_npu.npu._lazy_init()
    index = _get_device_index(device_id, optional=True)
    peer = _get_device_index(peer_device_id, optional=True)
    count = torch_npu.npu.device_count()
    if index < 0 or index >= count:
        raise AssertionError("Invalid devide id" + pta_error(ErrCode.VALUE))
    if peer < 0 or peer >= count:
        raise AssertionError("Invalid peer devide id" + pta_error(ErrCode.VALUE))
    return index != peer


@functools.cache
def _soc_supports_bf16() -> bool:
    # The SoC is chosen once per process (csrc/runtime/SocProfile.cpp); torch.autocast asks on every entry.
    return bool(_C._soc_profile()["bf16_supported"])


def is_bf16_supported(including_emulation: bool = False) -> bool:
    return _soc_supports_bf16()


def get_amp_supported_dtype() -> list[torch.dtype]:
    if is_bf16_supported():
        return [torch.float16, torch.bfloat16, torch.float32]
    return [torch.float16, torch.float32]


def get_soc_version() -> int:
    """The SoC's number in torch_npu's SocVersion enum (Ascend910B1 = 220)."""
    torch_npu.npu._lazy_init()
    return _C._soc_profile()["version"]


def utilization(device: torch.device | str | int | None = None) -> int:
    """AI-core utilisation in percent. vnpu executes operators when they are issued, so when the host
    asks, the device is idle: 0."""
    _checked_index(device)
    return 0


def _aclnn_reselect_static_kernel() -> None:
    """Makes aclnn select static kernel packages installed since start-up (torch_npu's static-kernel
    compiler calls it after installing one); see torch_npu.npu._op_info_dump.reselect_static_kernels."""
    torch_npu.npu._lazy_init()
    _C._aclnn_reselect_static_kernel()


def current_blas_handle() -> None:
    """NPUs have no BLAS handle: torch_npu warns and returns None."""
    warnings.warn("NPU does not use blas handle.")
    return None


def ipc_collect() -> None:
    """Release memory held for tensors shared with other processes (none outstanding on vnpu)."""
    torch_npu.npu._lazy_init()


def get_cann_version(module="CANN"):
    """vnpu has no CANN installation: the version of the CANN APIs it emulates, marked "+vnpu"."""
    if module not in ("CANN", "RUNTIME", "COMPILER", "HCCL", "TOOLKIT", "OPP", "OPP_KERNEL", "AOE", "DRIVER"):
        raise ValueError(f"module {module!r} is not a CANN module name")
    return "8.5.0+vnpu"


def _cann_version_key(version):
    """Orders CANN versions: 8.3.RC1 < 8.3.0 < 8.5.0 (a release candidate comes before its release)."""
    import re

    parts = version.split("+")[0].split(".")
    key = []
    for part in parts[:3]:
        rc = re.fullmatch(r"RC(\d+)", part, re.IGNORECASE)
        if rc:
            key += [-1, int(rc.group(1))]
        elif part.isdigit():
            key += [int(part), 0]
        else:
            raise ValueError(f"{version!r} is not a CANN version (e.g. 8.3.RC1 or 8.5.0)")
    return tuple(key)


def _is_gte_cann_version(version: str, module: str = "CANN") -> bool:
    """True when the CANN module vnpu emulates is at least `version`."""
    return _cann_version_key(get_cann_version(module)) >= _cann_version_key(version)


_SYNC_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """Report operations that make the host wait for the NPU: "default"/0 (silent), "warn"/1, "error"/2."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _SYNC_MODES[debug_mode]
    elif debug_mode not in _SYNC_MODES.values():
        raise RuntimeError("invalid value of debug_mode, expected one of 0,1,2")
    _C._set_sync_debug_mode(int(debug_mode))


def get_sync_debug_mode() -> int:
    return _C._get_sync_debug_mode()


from torch_npu.npu._obfuscation import obfuscation_calculate, obfuscation_finalize, obfuscation_initialize  # noqa
from torch_npu.npu._overflow import (  # noqa: E402,F401
    clear_npu_overflow_flag,
    get_npu_overflow_flag,
    is_support_inf_nan,
    npu_check_overflow,
)
from torch_npu.npu._reliability import check_uce_in_memory, set_op_timeout_ms, stress_detect  # noqa: E402,F401
from torch_npu.npu.npu_config import finalize_dump, init_dump, set_dump  # noqa: E402,F401
from torch_npu.npu.streams import (  # noqa: E402,F401
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)
