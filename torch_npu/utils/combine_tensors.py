"""Combining many tensors into one contiguous buffer (what torch_npu's fused optimizers run on).

After ``combined = npu_combine_tensors(tensors)`` every tensor in the list is a contiguous view into
``combined`` (in list order, without gaps), so one operator on ``combined`` updates all of them.
"""

import torch

from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = ["npu_combine_tensors", "get_part_combined_tensor", "is_combined_tensor_valid"]


def npu_combine_tensors(list_of_tensor, require_copy_value=True):
    """Allocate one buffer for all tensors, copy their values in (unless require_copy_value is
    False, then the buffer starts zeroed) and re-point each tensor into it. None for an empty list."""
    if not list_of_tensor:
        return None
    first = list_of_tensor[0]
    for t in list_of_tensor:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"npu_combine_tensors expects tensors, got {type(t).__name__}" + pta_error(ErrCode.TYPE))
        if t.dtype != first.dtype or t.device != first.device:
            raise RuntimeError(
                "npu_combine_tensors needs tensors of one dtype on one device, got "
                f"{first.dtype} on {first.device} and {t.dtype} on {t.device}" + pta_error(ErrCode.PARAM)
            )
    total = sum(t.numel() for t in list_of_tensor)
    combined = torch.zeros(total, dtype=first.dtype, device=first.device)
    offset = 0
    with torch.no_grad():
        for t in list_of_tensor:
            n = t.numel()
            if require_copy_value:
                combined[offset : offset + n].copy_(t.reshape(-1))
            t.set_(combined.untyped_storage(), offset, t.shape)
            offset += n
    return combined


def get_part_combined_tensor(combined_tensor, index, size):
    """The ``size`` elements of a combined buffer starting at element ``index``."""
    if combined_tensor is None:
        return None
    if index < 0 or size < 0 or index + size > combined_tensor.numel():
        raise RuntimeError(
            f"get_part_combined_tensor: [{index}, {index + size}) is outside the combined tensor of "
            f"{combined_tensor.numel()} elements" + pta_error(ErrCode.VALUE)
        )
    return combined_tensor[index : index + size]


def is_combined_tensor_valid(combined_tensor, list_of_tensor):
    """True when every tensor is still the contiguous view npu_combine_tensors made of it."""
    if not list_of_tensor:  # torch_npu: nothing to check is valid
        return True
    if combined_tensor is None:
        return False
    base = combined_tensor.untyped_storage().data_ptr()
    offset = combined_tensor.storage_offset()
    for t in list_of_tensor:
        if t is None or t.untyped_storage().data_ptr() != base or t.storage_offset() != offset or not t.is_contiguous():
            return False
        offset += t.numel()
    return offset <= combined_tensor.storage_offset() + combined_tensor.numel()
