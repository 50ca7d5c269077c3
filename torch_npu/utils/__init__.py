"""torch_npu.utils: helpers shared by the npu modules."""
