"""torch_npu.distributed.pipelining: PyTorch's pipeline splitter with torch_npu's FX tracing mode."""

from torch_npu.distributed.pipelining.pipeline import pipeline

__all__ = ["pipeline"]

pipeline.__module__ = __name__
