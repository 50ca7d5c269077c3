"""Autocast state of the npu device (torch.npu.is_autocast_enabled and friends)."""

import torch

__all__ = [
    "get_amp_supported_dtype",
    "is_autocast_enabled",
    "set_autocast_enabled",
    "get_autocast_dtype",
    "set_autocast_dtype",
]


def get_amp_supported_dtype() -> list[torch.dtype]:
    from torch_npu.npu.utils import get_amp_supported_dtype as supported

    return supported()


def is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled("npu")


def set_autocast_enabled(enable: bool) -> None:
    torch.set_autocast_enabled("npu", bool(enable))


def get_autocast_dtype() -> torch.dtype:
    return torch.get_autocast_dtype("npu")


def set_autocast_dtype(dtype: torch.dtype) -> None:
    if dtype not in get_amp_supported_dtype():
        raise ValueError(f"npu autocast supports {get_amp_supported_dtype()}, not {dtype}")
    torch.set_autocast_dtype("npu", dtype)
