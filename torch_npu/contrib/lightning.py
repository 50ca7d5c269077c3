"""Lightning on npu: an accelerator registered as "npu" and the mixed-precision plugin for npu.

    import lightning as L
    trainer = L.Trainer(accelerator="npu", devices=2, precision="bf16-mixed")

Lightning knows no npu device of its own. `NPUAccelerator` is a Lightning Accelerator for torch's npu
device, and `NPUMixedPrecision` runs autocast on npu ("bf16-mixed", or "16-mixed" with torch_npu's
GradScaler). vnpu registers the accelerator under "npu" when Lightning is imported, and lets the
Trainer's flags choose them (see torch_npu._patches): one npu device trains with a single-device
strategy on that device, several with DDP over hccl. The classes are built for both distributions
of Lightning: `lightning.pytorch` (the names below) and the standalone `pytorch_lightning`
(`accelerator_for("pytorch_lightning")`, `precision_for("pytorch_lightning")`).
"""

import functools
import importlib

import torch

__all__ = ["NPUAccelerator", "NPUMixedPrecision", "accelerator_for", "precision_for"]  # noqa: F822 (lazy, __getattr__)


def _parse_devices(devices):
    """Lightning's `devices`: a count (-1: all), a list of indices, or "0,1" / "2" strings."""
    count = torch.npu.device_count()
    if isinstance(devices, str):
        devices = devices.strip()
        if devices == "-1":
            devices = -1
        elif "," in devices:
            devices = [int(d) for d in devices.split(",") if d.strip()]
        else:
            devices = int(devices)
    if isinstance(devices, int):
        if devices == -1:
            return list(range(count))
        if devices < 0:
            raise ValueError(f"devices must be a positive count, -1 or a list of npu indices, got {devices}")
        indices = list(range(devices))
    else:
        indices = [int(d) for d in devices]
    missing = [i for i in indices if i >= count]
    if missing:
        raise ValueError(
            f"You requested npu:{missing} but only {count} npu devices are visible "
            f"(ASCEND_RT_VISIBLE_DEVICES selects them)"
        )
    return indices


def accelerator_for(package="lightning.pytorch"):
    """NPUAccelerator for `lightning.pytorch` or `pytorch_lightning` (one class per package)."""
    return _accelerator_class(package)


def precision_for(package="lightning.pytorch"):
    """NPUMixedPrecision for `lightning.pytorch` or `pytorch_lightning` (one class per package)."""
    return _precision_class(package)


@functools.cache
def _accelerator_class(package):
    accelerators = importlib.import_module(f"{package}.accelerators")

    class NPUAccelerator(accelerators.Accelerator):
        """Ascend NPUs through torch_npu (`torch.npu`)."""

        def setup_device(self, device):
            if device.type != "npu":
                raise ValueError(f"Device should be npu, got {device} instead")
            torch.npu.set_device(device)

        def teardown(self):
            torch.npu.empty_cache()

        def get_device_stats(self, device):
            return torch.npu.memory_stats(device)

        @staticmethod
        def parse_devices(devices):
            return _parse_devices(devices)

        @staticmethod
        def get_parallel_devices(devices):
            return [torch.device("npu", i) for i in _parse_devices(devices)]

        @staticmethod
        def auto_device_count():
            return torch.npu.device_count()

        @staticmethod
        def is_available():
            return torch.npu.is_available()

        @staticmethod
        def name():
            return "npu"

        @classmethod
        def register_accelerators(cls, accelerator_registry):
            accelerator_registry.register("npu", cls, description=cls.__name__, override=True)

    NPUAccelerator.__module__, NPUAccelerator.__qualname__ = __name__, "NPUAccelerator"
    return NPUAccelerator


@functools.cache
def _precision_class(package):
    amp = importlib.import_module(f"{package}.plugins.precision.amp")

    class NPUMixedPrecision(amp.MixedPrecision):
        """Automatic mixed precision on npu: "bf16-mixed", or "16-mixed" with torch_npu's GradScaler."""

        def __init__(self, precision, scaler=None):
            if precision == "16-mixed" and scaler is None:
                scaler = torch.npu.amp.GradScaler()
            super().__init__(precision, "npu", scaler)

    NPUMixedPrecision.__module__, NPUMixedPrecision.__qualname__ = __name__, "NPUMixedPrecision"
    return NPUMixedPrecision


def __getattr__(name):
    if name == "NPUAccelerator":
        return accelerator_for()
    if name == "NPUMixedPrecision":
        return precision_for()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
