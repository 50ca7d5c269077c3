"""``torch.npu.amp.autocast`` = ``torch.autocast("npu", ...)`` with torch_npu's op policy
(registered in C++ for the AutocastPrivateUse1 key)."""

import functools

import torch

__all__ = ["autocast", "custom_fwd", "custom_bwd"]


class autocast(torch.amp.autocast_mode.autocast):
    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True):
        super().__init__("npu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)

    def __enter__(self):
        return super().__enter__()

    def __exit__(self, exc_type, exc_val, exc_tb):
        return super().__exit__(exc_type, exc_val, exc_tb)

    def __call__(self, func):
        return super().__call__(func)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``torch.amp.custom_fwd(device_type="npu")`` for a custom autograd.Function's forward."""
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)
    return torch.amp.custom_fwd(fwd, device_type="npu", cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """``torch.amp.custom_bwd(device_type="npu")`` for a custom autograd.Function's backward."""
    return torch.amp.custom_bwd(bwd, device_type="npu")
