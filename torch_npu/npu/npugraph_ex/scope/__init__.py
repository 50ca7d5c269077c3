"""npugraph_ex.scope: settings for the operators issued inside a block."""

from contextlib import contextmanager

__all__ = ["deterministic", "limit_core_num"]


@contextmanager
def deterministic(level: int):
    """Operators inside run at this deterministic level (see set_deterministic_level)."""
    from torch_npu.npu import deterministic as det

    previous = det.get_deterministic_level()
    det.set_deterministic_level(level)
    try:
        yield
    finally:
        det.set_deterministic_level(previous)


@contextmanager
def limit_core_num(op_aicore_num: int, op_vectorcore_num: int, stream=None):
    """Operators inside may use at most these cores on `stream` (default: the current stream)."""
    import torch

    from torch_npu.npu import npu_config

    stream = stream if stream is not None else torch.npu.current_stream()
    previous = npu_config.get_stream_limit(stream)
    npu_config.set_stream_limit(stream, op_aicore_num, op_vectorcore_num)
    try:
        yield
    finally:
        npu_config.set_stream_limit(stream, previous["cube_core_num"], previous["vector_core_num"])
