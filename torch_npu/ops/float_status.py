"""The float-status operators: npu_alloc_float_status, npu_get_float_status, npu_clear_float_status.

On the card they read and clear the AI core's overflow status register (NPUGetFloatStatus on
saturation-mode SoCs, NPUGetFloatStatusV2 on Ascend910B and later). vnpu's register is the flag that
torch_npu.npu._overflow keeps: set when an npu operator produces inf or NaN, watched from the first
float-status call on. The status is 8 values; the first is non-zero after an overflow.

What each returns follows torch_npu: get on a saturation-mode SoC (mode 0) writes the status into the
float buffer it is given and returns it as float values; on Ascend910B and later, and in debug mode (1),
it returns a new int32 status. clear returns a zeroed buffer shaped like the status.
"""

import torch

from torch_npu.npu import _overflow
from torch_npu.ops.registration import npu_op
from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = []

_STATUS_SIZE = 8
_ORIGINAL_MODE, _DEBUG_MODE = 0, 1


def _check_mode(mode):
    if mode not in (_ORIGINAL_MODE, _DEBUG_MODE):
        raise RuntimeError(
            f"mode only supported for ORIGINAL_MODE(0) DEBUG_MODE(1), but got mode:{mode}" + ops_error(ErrCode.PARAM)
        )


def _status(dtype, device, overflowed):
    status = torch.zeros(_STATUS_SIZE, dtype=dtype, device=device)
    status[0] = 1 if overflowed else 0
    return status


def _writes_into_buffer(self, mode):
    return mode == _ORIGINAL_MODE and not _overflow.is_support_inf_nan()


@npu_op("npu_alloc_float_status(Tensor self) -> Tensor", fake=lambda self: self.new_empty(8, dtype=torch.float32))
def npu_alloc_float_status(self):
    """A zeroed float32 status buffer [8] on self's device; overflow is watched from here on."""
    _overflow.float_status()
    return torch.zeros(_STATUS_SIZE, dtype=torch.float32, device=self.device)


def _get_fake(self, mode=0):
    _check_mode(mode)
    return self.new_empty(_STATUS_SIZE, dtype=self.dtype if _writes_into_buffer(self, mode) else torch.int32)


@npu_op("npu_get_float_status(Tensor self, int mode=0) -> Tensor", fake=_get_fake)
def npu_get_float_status(self, mode=0):
    """The status [8]: element 0 is 1 when an npu operator overflowed (inf/NaN) since the last clear."""
    _check_mode(mode)
    overflowed = _overflow.float_status()
    if _writes_into_buffer(self, mode):
        status = _status(self.dtype, self.device, overflowed)
        if self.shape == status.shape:
            self.copy_(status)  # the register is read into the caller's buffer, as NPUGetFloatStatus does
        return status
    return _status(torch.int32, self.device, overflowed)


def _clear_fake(self, mode=0):
    _check_mode(mode)
    return self.new_empty(_STATUS_SIZE)


@npu_op("npu_clear_float_status(Tensor self, int mode=0) -> Tensor", fake=_clear_fake)
def npu_clear_float_status(self, mode=0):
    """Clears the status; returns a zeroed buffer [8] of self's dtype."""
    _check_mode(mode)
    _overflow.clear_float_status()
    return torch.zeros(_STATUS_SIZE, dtype=self.dtype, device=self.device)
