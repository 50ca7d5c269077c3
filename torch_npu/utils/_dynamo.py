"""torch_npu.utils._dynamo: Dynamo's view of the npu device."""

__all__ = []


def _dynamo_register_interface_for_device():
    """Register the npu device interface with Dynamo (torch._dynamo.device_interface), for "npu" and every
    "npu:N" — what import torch_npu does once torch._dynamo is imported."""
    from torch_npu._inductor.device_interface import register

    return register()
