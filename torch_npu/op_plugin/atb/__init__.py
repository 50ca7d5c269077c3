"""torch_npu.op_plugin.atb: op-plugin's ATB operators (the NNAL library's), at torch_npu's import paths."""

__all__ = []
