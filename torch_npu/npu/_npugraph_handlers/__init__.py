"""torch_npu.npu._npugraph_handlers: where torch_npu keeps its NPU graph operator handlers (npugraph_handler)."""

__all__ = []
