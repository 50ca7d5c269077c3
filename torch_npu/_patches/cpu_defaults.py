"""Where PyTorch picks an implementation by device type, npu gets the CPU's pick: npu runs the CPU's
kernels, so the CPU's choice is the one that gives the CPU's numbers."""

import sys


def _without_npu(supported_devices):
    def foreach_devices():
        return [device for device in supported_devices() if device != "npu"]

    foreach_devices.__wrapped__ = supported_devices
    return foreach_devices


def foreach_defaults_of_the_cpu():
    """Optimizers and swa_utils' AveragedModel default to foreach kernels on the devices
    _get_foreach_kernels_supported_devices lists (npu among them, as a PrivateUse1 backend) and to the
    per-tensor loop on the CPU. The names torch.optim.optimizer and torch.optim.swa_utils imported leave npu
    out, so those defaults are the CPU's; an explicit foreach=True still runs the foreach kernels on npu.
    torch.utils._foreach_utils keeps its own list: clip_grad_norm_ / clip_grad_value_ use foreach kernels on
    the CPU as on every listed device (its support check adds "cpu"), so npu takes them too, by default and
    with foreach=True."""
    from torch.utils import _foreach_utils

    patched = _without_npu(_foreach_utils._get_foreach_kernels_supported_devices)
    for name in ("torch.optim.optimizer", "torch.optim.swa_utils"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "_get_foreach_kernels_supported_devices"):
            module._get_foreach_kernels_supported_devices = patched
    return True
