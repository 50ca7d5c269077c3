"""torch.save(..., _use_new_zipfile_serialization=False): torch_npu warns once that the legacy format is not
recommended for npu tensors (the save itself proceeds)."""

import functools

import torch

LEGACY_SAVE_WARNING = (
    'Warning: torch.save with "_use_new_zipfile_serialization = False" is not recommended for NPU tensors, '
    'which may cause unexpected errors. It is better to set "_use_new_zipfile_serialization = True". '
    "If it is necessary to use this, please convert the NPU tensors to CPU tensors for saving."
)
_warned = []


def legacy_save_warns_once():
    original = torch.serialization._legacy_save
    if getattr(original, "__vnpu_patch__", False):
        return False

    @functools.wraps(original)
    def _legacy_save(obj, f, pickle_module, pickle_protocol):
        from torch_npu.utils._warnings import should_print_warning

        if not _warned:
            _warned.append(True)
            if should_print_warning():
                print(LEGACY_SAVE_WARNING)
        return original(obj, f, pickle_module, pickle_protocol)

    _legacy_save.__vnpu_patch__ = True
    torch.serialization._legacy_save = _legacy_save
    return True
