"""The NPU graph operator handlers under torch_npu's module path: _NPU_GRAPH_OP_HANDLERS is the registry that
register_npu_graph_handler fills (operator name -> NpuGraphOpHandler class), the one NPUGraph.update reads."""

from torch_npu.npu.graphs import NpuGraphOpHandler, register_npu_graph_handler
from torch_npu.npu.graphs import _graph_handlers as _NPU_GRAPH_OP_HANDLERS  # noqa: F401  (the registry itself)

__all__ = ["NpuGraphOpHandler", "register_npu_graph_handler"]
