"""Overflow detection: torch_npu's float-status flag and npu_check_overflow.

Atlas A2/A3 SoCs compute with IEEE inf/nan (is_support_inf_nan() is True), so overflow shows up
as inf/nan in the data and the float-status APIs are refused, as torch_npu refuses them. On
saturation-mode SoCs (VNPU_SOC=Ascend910A, Ascend910ProB, Ascend310P3, or INF_NAN_MODE_ENABLE=0 with
INF_NAN_MODE_FORCE_DISABLE=1) the device keeps a float-status register: vnpu sets it when an npu
operator produces inf or NaN. There the watch starts when the device initialises, as the card's
register records from the start: GradScaler's first step reads it. On inf/NaN SoCs the npu_*_float_status
operators still read the flag, watched from their first call on (watching from the start would scan every
operator's output on the default SoC).
"""

import os
import threading

import torch

import torch_npu
from torch_npu import _C
from torch_npu.npu import _lazy_call
from torch_npu.utils._error_code import ErrCode, pta_error

_lock = threading.Lock()
_state = {"flag": False, "hook": None}


def is_support_inf_nan() -> bool:
    """True when the SoC computes in IEEE inf/nan mode (Atlas A2/A3 by default)."""
    torch_npu.npu._lazy_init()
    soc = _C._soc_profile()["version"]
    if soc < 220:
        return False  # 910A / 310P: saturation mode only
    forced_off = os.environ.get("INF_NAN_MODE_ENABLE") == "0" and os.environ.get("INF_NAN_MODE_FORCE_DISABLE") == "1"
    return not forced_off


def _refuse_on_inf_nan_socs():
    if is_support_inf_nan():
        raise RuntimeError(
            "Unsupport api when soc_version >= Ascend910B1, please use npu_check_overflow"
            + pta_error(ErrCode.NOT_SUPPORT)
        )


def _watch(name, inputs, outputs, device, start_ns, end_ns):
    if _state["flag"]:
        return
    for t in outputs:
        if (
            isinstance(t, torch.Tensor)
            and t.device.type == "npu"  # results copied to the host are not the device's to flag
            and (t.is_floating_point() or t.is_complex())
            and t.numel()
        ):
            if not bool(torch_npu._C._cpu_alias(t).isfinite().all()):
                _state["flag"] = True
                return


def _arm():
    with _lock:
        if _state["hook"] is None:
            _state["hook"] = _C._add_python_op_hook(_watch)


def float_status() -> bool:
    """The device's float-status flag: whether an npu operator produced inf/NaN since it was last cleared
    (watched from the first call of a float-status API on; the npu_*_float_status operators read it on
    every SoC)."""
    _arm()
    return _state["flag"]


def clear_float_status() -> None:
    _arm()
    _state["flag"] = False


def take_float_status() -> bool:
    """The float-status flag, cleared when it was set: how the card's overflow checks consume it."""
    overflowed = float_status()
    if overflowed:
        clear_float_status()
    return overflowed


def get_npu_overflow_flag() -> bool:
    """Whether an operator overflowed since the last clear (saturation-mode SoCs only)."""
    _refuse_on_inf_nan_socs()
    return float_status()


def clear_npu_overflow_flag() -> None:
    """Clear the float-status flag (saturation-mode SoCs only)."""
    _refuse_on_inf_nan_socs()
    clear_float_status()


def npu_check_overflow(grad: torch.Tensor | float) -> bool:
    """True when `grad` (a tensor or a float) overflowed: inf/nan in its sum on inf/nan SoCs, the
    float-status flag (then cleared) elsewhere."""
    if is_support_inf_nan():
        if isinstance(grad, float):
            total = grad
        elif isinstance(grad, torch.Tensor):
            total = float(grad.float().sum())
        else:
            raise RuntimeError("Unsupport type." + pta_error(ErrCode.TYPE))
        return total in (float("inf"), -float("inf")) or total != total
    return take_float_status()


def _watch_from_initialisation_on_saturation_mode_socs():
    if not is_support_inf_nan():
        _arm()


_lazy_call(_watch_from_initialisation_on_saturation_mode_socs)
