"""torch_npu.utils._dynamo: Dynamo's view of the npu device, and whether torch_npu's inductor is set up.

`register_inductor_npu()` sets up compilation for npu graphs by importing torch_npu._inductor (torch_npu does it
on a program's first torch.compile with inductor); `disable_register_inductor_npu()` /
`enable_register_inductor_npu()` turn that off and on again, and `is_inductor_npu_initialized()` says whether it
has happened, also when the program imported torch_npu._inductor itself.
"""

import sys

__all__ = []


def _dynamo_register_interface_for_device():
    """Register the npu device interface with Dynamo (torch._dynamo.device_interface), for "npu" and every
    "npu:N" — what import torch_npu does once torch._dynamo is imported."""
    from torch_npu._inductor.device_interface import register

    return register()


class _InductorNpuRegistry:
    """Whether torch_npu._inductor has been set up, and whether setting it up is allowed."""

    _disabled_register = False
    _has_inited = False

    @classmethod
    def register_inductor_npu(cls):
        if cls.has_initialized() or cls._disabled_register:
            return
        import torch_npu._inductor  # noqa: F401

        cls._has_inited = True

    @classmethod
    def disable_register(cls):
        cls._disabled_register = True

    @classmethod
    def enable_register(cls):
        cls._disabled_register = False

    @classmethod
    def has_initialized(cls):
        if not cls._has_inited and "torch_npu._inductor" in sys.modules:
            cls._has_inited = True  # imported by the program
        return cls._has_inited


def is_inductor_npu_initialized():
    return _InductorNpuRegistry.has_initialized()


def disable_register_inductor_npu():
    _InductorNpuRegistry.disable_register()


def enable_register_inductor_npu():
    _InductorNpuRegistry.enable_register()


def register_inductor_npu():
    _InductorNpuRegistry.register_inductor_npu()
