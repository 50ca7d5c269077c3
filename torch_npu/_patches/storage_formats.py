"""An npu storage's private format (and the base sizes kept with it) survives copy.deepcopy, as in torch_npu."""

import functools

import torch


def _bytes_of(storage):
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)


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

            source = _bytes_of(self)
            fmt, numel = _C._storage_format(source)
            if fmt >= 0:
                _C._set_storage_format(_bytes_of(copied), fmt, numel, *(_C._storage_base(source) or ()))
        return copied

    __deepcopy__.__vnpu_patch__ = True
    torch.UntypedStorage.__deepcopy__ = __deepcopy__
    return True
