"""torch_npu.op_plugin.meta: the meta (fake) kernels of the npu operators."""

__all__ = []
