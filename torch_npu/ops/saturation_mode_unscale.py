"""torch._amp_foreach_non_finite_check_and_unscale_ on saturation-mode SoCs (Ascend910A, Ascend310P ...).

There the card has no inf/NaN in its data: an overflow saturates and sets the AI core's float-status register,
and torch_npu's kernel reads that register instead of the gradients — any operator that overflowed since the
status was last cleared counts, not only the gradients given. When it is set, the kernel clears it, adds 1 to
found_inf and leaves the gradients scaled; otherwise it checks the gradients (npu, one device, one dtype)
and multiplies them by inv_scale. vnpu's register is torch_npu.npu._overflow's flag.

On inf/NaN SoCs (Atlas A2/A3, the default) nothing is registered: the operator is PyTorch's, as torch_npu's
aclnn kernel computes it.
"""

import warnings

import torch

from torch_npu.npu import _lazy_call, _overflow
from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = []

_state = {"library": None, "warned": False}


def _check(condition, message, code=ErrCode.PARAM):
    if not condition:
        raise RuntimeError(message + ops_error(code))


def _unscale_by_float_status(scaled_grads, found_inf, inv_scale):
    if not _state["warned"]:
        _state["warned"] = True
        warnings.warn("Non finite check and unscale on NPU device!")
    _check(inv_scale.device.type == "npu", "inv_scale must be NPU-Tensor")
    _check(inv_scale.numel() == 1, "inv_scale must be a 1-element tensor")
    _check(inv_scale.dtype == torch.float32, "inv_scale must be a float tensor", ErrCode.TYPE)
    if not scaled_grads:
        return
    if _overflow.take_float_status():
        found_inf.add_(1)
        return
    device, dtype = scaled_grads[0].device, scaled_grads[0].dtype
    for grad in scaled_grads:
        _check(grad.device.type == "npu", "one of scaled_grads was not a NPU tensor.")
        _check(grad.device == device, "scaled_grads must be on the same device.")
        _check(grad.dtype == dtype, "scaled_grads must have the same dtype.", ErrCode.TYPE)
    for grad in scaled_grads:
        grad.mul_(inv_scale)


def _register_on_saturation_mode_socs():
    if _state["library"] is None and not _overflow.is_support_inf_nan():
        library = torch.library.Library("aten", "IMPL")
        library.impl("_amp_foreach_non_finite_check_and_unscale_", _unscale_by_float_status, "PrivateUse1")
        _state["library"] = library


_lazy_call(_register_on_saturation_mode_socs)
