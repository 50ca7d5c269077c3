"""Rebuilding npu tensors from pickles: torch_npu's `_rebuild_npu_tensor`, which checkpoints written by
torch_npu releases that pickled npu tensors through it name (and which tools such as msprobe allow in
torch.load's weights_only mode)."""

import torch

__all__ = []


def _rebuild_npu_tensor(storage, storage_offset, size, stride, requires_grad, backward_hooks, npu_storage_info):
    """The npu tensor a pickle describes: host `storage` viewed with (offset, size, stride), moved to the
    npu, in the npu format `npu_storage_info` names (an int; a bool means the default format)."""
    import torch_npu

    tensor = torch.empty(0, dtype=storage.dtype).set_(storage, storage_offset, size, stride).npu()
    if not isinstance(npu_storage_info, bool) and isinstance(npu_storage_info, int):
        tensor = torch_npu.npu_format_cast(tensor, npu_storage_info)
    tensor.requires_grad = requires_grad
    tensor._backward_hooks = backward_hooks
    return tensor
