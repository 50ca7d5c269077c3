"""Printing an npu tensor: torch_npu formats a copy on the host (torch_npu.utils._tensor_str), so printing
works as on the CPU. PyTorch's formatter would convert the npu values to float64 on the device, which the card
cannot do (vnpu, like torch_npu, casts such conversions to float32 and warns)."""

import functools

import torch._tensor_str


def npu_tensors_print_from_the_host():
    original = torch._tensor_str._tensor_str
    if getattr(original, "__vnpu_patch__", False):
        return False

    @functools.wraps(original)
    def _tensor_str(self, indent):
        if self.device.type == "npu":
            self = self.cpu()
        return original(self, indent)

    _tensor_str.__vnpu_patch__ = True
    torch._tensor_str._tensor_str = _tensor_str
    return True
