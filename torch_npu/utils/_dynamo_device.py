"""torch_npu.utils._dynamo_device: the npu device interface Dynamo and inductor use (`NpuInterface`,
registered for "npu" and each "npu:N" by `_dynamo_register_interface_for_device`), with the runtime
functions it is made of. Importing this module imports torch._dynamo.device_interface."""

from torch_npu._inductor.device_interface import npu_interface
from torch_npu.npu import (  # noqa: F401 - the runtime functions torch_npu's module offers beside the class
    current_device,
    current_stream,
    device_count,
    get_device_capability,
    set_device,
    set_stream,
    stream,
    synchronize,
)
from torch_npu.utils._dynamo import _dynamo_register_interface_for_device  # noqa: F401

__all__ = []

NpuInterface = npu_interface()
