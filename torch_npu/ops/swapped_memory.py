"""empty_with_swapped_memory: an npu tensor whose memory lives on the host (torch_npu's swapped memory).

The bytes come from the host allocator instead of the npu caching allocator, so they take nothing from the
device's capacity and do not show in torch.npu.memory_allocated / memory_reserved, as on the card. The card
supports only fill_, zero_, mul_, npu_apply_adam_w and the hans codecs on such a tensor (and cannot print it);
vnpu's host memory serves every operator, so it is more permissive there.
"""

import torch

import torch_npu
from torch_npu import _C
from torch_npu.ops._library import define
from torch_npu.ops.registration import _export
from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = []

define("empty_with_swapped_memory(int[] size, *, ScalarType? dtype=None, Device? device=None) -> Tensor")


@torch.library.impl("npu::empty_with_swapped_memory", "CompositeExplicitAutograd")
def _empty_with_swapped_memory(size, dtype=None, device=None):
    device = torch.device("npu") if device is None else torch.device(device)
    if device.type != "npu":
        raise RuntimeError(
            f"empty_with_swapped_memory makes npu tensors, got device {device}" + ops_error(ErrCode.PARAM)
        )
    torch_npu.npu._lazy_init()  # as every npu factory does
    index = torch_npu.npu.current_device() if device.index is None else device.index
    return _C._empty_with_swapped_memory(list(size), dtype or torch.get_default_dtype(), index)


@torch.library.register_fake("npu::empty_with_swapped_memory")
def _fake(size, dtype=None, device=None):
    return torch.empty(list(size), dtype=dtype or torch.get_default_dtype(), device=device or "npu")


_export("empty_with_swapped_memory")
