"""torchvision's operators for a torchvision whose C++ extension cannot load beside CPU torch."""

import sys

import torch


def provide_operators():
    extension = sys.modules["torchvision.extension"]
    if extension._has_ops() or hasattr(torch.ops.torchvision, "nms"):
        return False  # torchvision's own kernels are loaded: npu tensors reach them through the redirect
    from torch_npu import _C

    _C._define_torchvision_operators()
    extension._has_ops = _operators_available
    return True


def _operators_available():
    return True
