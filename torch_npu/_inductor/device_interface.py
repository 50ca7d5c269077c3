"""Dynamo's and inductor's view of the npu device (torch._dynamo.device_interface).

The class is built when Dynamo's device_interface module has been imported (this module must not
import it: its import is what registers the interface).
"""

import functools
import os

import torch


def npu_interface():
    """The interface class (one per process). Dynamo's module is imported first: that import registers the
    interface (patch registry), which builds it, so building here as well would make a second class."""
    import torch._dynamo.device_interface  # noqa: F401

    return _build_npu_interface()


@functools.cache
def _build_npu_interface():
    from torch._dynamo.device_interface import CpuDeviceProperties, DeviceInterface

    class NpuInterface(DeviceInterface):
        """The npu runtime for Dynamo and inductor: devices, streams, events, properties."""

        device = torch.npu.device
        Event = torch.npu.Event
        Stream = torch.npu.Stream

        class Worker:
            @staticmethod
            def set_device(device):
                torch.npu.set_device(device)

            @staticmethod
            def current_device():
                return torch.npu.current_device()

            @staticmethod
            def get_device_properties(device=None):
                # Inductor sizes its CPU kernels' parallelism by the host cores that run them.
                return CpuDeviceProperties(os.cpu_count() or 1)

        current_device = staticmethod(torch.npu.current_device)
        set_device = staticmethod(torch.npu.set_device)
        device_count = staticmethod(torch.npu.device_count)
        is_available = staticmethod(torch.npu.is_available)
        synchronize = staticmethod(torch.npu.synchronize)
        current_stream = staticmethod(torch.npu.current_stream)
        stream = staticmethod(torch.npu.stream)
        set_stream = staticmethod(torch.npu.set_stream)

        @staticmethod
        def exchange_device(device):
            previous = torch.npu.current_device()
            if device >= 0 and device != previous:
                torch.npu.set_device(device)
            return previous

        maybe_exchange_device = exchange_device

        @staticmethod
        def _set_stream_by_id(stream_id, device_index, device_type):
            torch.npu.set_stream(
                torch.npu.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)
            )

        @staticmethod
        def get_raw_stream(device_index):
            return torch.npu.current_stream(device_index).npu_stream

        @staticmethod
        def get_compute_capability(device=None):
            return ""

        @staticmethod
        def is_bf16_supported(including_emulation=False):
            return torch.npu.is_bf16_supported()

        @staticmethod
        def memory_allocated(device=None):
            return torch.npu.memory_allocated(device)

        @staticmethod
        def is_triton_capable(device=None):
            return False  # kernels are C++ for the host, not Triton

    return NpuInterface


def register():
    from torch._dynamo.device_interface import register_interface_for_device

    interface = npu_interface()
    register_interface_for_device("npu", interface)
    for index in range(torch.npu.device_count()):
        register_interface_for_device(f"npu:{index}", interface)
    return True
