"""torch_npu.op_plugin: where torch_npu's operator library registers itself. vnpu's operators are defined in
torch_npu.ops (kernel, fake kernel and backward together); this package keeps torch_npu's import paths."""

__all__ = []
