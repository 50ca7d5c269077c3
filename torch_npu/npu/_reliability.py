"""Reliability APIs of torch_npu: hardware stress tests, memory UCE checks, stopping and restarting
a device, operator timeouts. vnpu's devices are software: they pass every test and never hit an
uncorrectable memory error, but stopping a device really stops it."""

import torch_npu
from torch_npu import _C
from torch_npu.utils._error_code import ErrCode, pta_error

_op_timeout_ms = None


def stress_detect(detect_type: str = "aic") -> int:
    """Run the on-chip stress test: 0 means no fault found (always, on vnpu)."""
    if detect_type not in ("aic", "hccs"):
        raise ValueError(f"detect_type must be 'aic' or 'hccs', but got {detect_type!r}" + pta_error(ErrCode.VALUE))
    torch_npu.npu._lazy_init()
    return 0


def check_uce_in_memory(device_id: int) -> int:
    """Kind of uncorrectable memory error found on the device: 0 = none (vnpu memory is host RAM)."""
    torch_npu.npu.utils._valid_index(device_id)
    return 0


def _uce_addresses() -> list:
    """The memory regions ({"ptr", "size"}) with uncorrectable errors the last check_uce_in_memory found
    (torch_npu._C._npu_get_uce_addr): none on vnpu."""
    return []


def stop_device(device_id: int) -> None:
    """Stop a device: every operation on it raises until restart_device(). Returns 0 on success."""
    _C._set_device_stopped(torch_npu.npu.utils._valid_index(device_id), True)
    return 0


def restart_device(
    device_id: int, rebuild_all_resources: bool = False, disable_tensor_unsafe_check: bool = False
) -> None:
    """Restart a stopped device (its tensors stay valid: vnpu memory survives a restart)."""
    _C._set_device_stopped(torch_npu.npu.utils._valid_index(device_id), False)


def set_op_timeout_ms(timeout: int) -> None:
    """Operator execution timeout in ms (vnpu operators finish when they return; recorded only)."""
    global _op_timeout_ms
    # torch_npu unpacks an unsigned 32-bit integer, with CPython's and PyTorch's errors
    if not isinstance(timeout, int):
        raise TypeError(f"'{type(timeout).__name__}' object cannot be interpreted as an integer")
    if timeout < 0:
        raise OverflowError("can't convert negative int to unsigned")
    if timeout > 0xFFFFFFFF:
        raise RuntimeError("Overflow when unpacking unsigned long")
    _op_timeout_ms = timeout
