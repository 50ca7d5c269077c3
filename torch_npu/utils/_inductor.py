"""Inductor's per-device registrations for npu. Inductor compiles an npu graph as the CPU graph it computes
(torch_npu._inductor.host_compile), so the host code it generates around npu kernels is the CPU's: the npu
entry of inductor's device op overrides is the CPU's (applied by the patch registry on import of
torch._inductor.codegen.common)."""

__all__ = []


def register_device_op_overrides():
    """torch._inductor.codegen.common.device_op_overrides_dict['npu']; True when registered by this call."""
    from torch._inductor.codegen import common
    from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides

    if common.device_op_overrides_dict.get("npu") is not None:
        return False
    common.register_device_op_overrides("npu", CpuDeviceOpOverrides())
    return True
