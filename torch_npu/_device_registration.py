"""Plugging the npu device into PyTorch: the PrivateUse1 backend renamed ``npu``."""

import torch

from torch_npu import _C, _device_checks, _op_selection, _op_support


def register_npu_device(unsupported_dtype):
    torch.utils.rename_privateuse1_backend("npu")
    from torch_npu import npu as npu_module

    torch._register_device_module("npu", npu_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_storage=True, unsupported_dtype=unsupported_dtype
    )
    # Before operators are registered or run: an operator-support profile decides, per operator, what
    # real hardware would run through torch_npu's CPU fallback.
    _op_support.activate_from_environment(_C)
    _C._set_cpu_operand_message(_device_checks.cpu_operand_message)
    _C._register_redirects(_op_selection.redirected_operators())
