"""An npu storage's private format survives copy.deepcopy, as in torch_npu."""

import functools

import torch


def _format_of(storage):
    from torch_npu import _C

    view = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
    return _C._storage_format(view)


def deepcopy_keeps_the_format():
    """torch.UntypedStorage.__deepcopy__ (tensor deepcopies go through it) marks the copy with the format."""
    original = torch.UntypedStorage.__deepcopy__
    if getattr(original, "__vnpu_patch__", False):
        return False

    @functools.wraps(original)
    def __deepcopy__(self, memo):
        copied = original(self, memo)
        if self.device.type == "npu":
            from torch_npu import _C

            fmt, numel = _format_of(self)
            if fmt >= 0:
                view = torch.empty(0, dtype=torch.uint8, device=copied.device).set_(copied)
                _C._set_storage_format(view, fmt, numel)
        return copied

    __deepcopy__.__vnpu_patch__ = True
    torch.UntypedStorage.__deepcopy__ = __deepcopy__
    return True
