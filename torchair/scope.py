"""torchair.scope: settings for the part of a graph a `with` block covers."""

from contextlib import contextmanager

from torch_npu.npu.npugraph_ex.scope import limit_core_num

__all__ = ["npu_stream_switch", "super_kernel", "limit_core_num"]


@contextmanager
def npu_stream_switch(stream_tag: str, stream_priority: int = 0):
    """On Ascend, operators inside run on a separate stream of the compiled graph. vnpu runs operators
    as they are issued (streams never have pending work), so the results are the same either way."""
    if not isinstance(stream_tag, str):
        raise TypeError(f"stream_tag must be a str, got {type(stream_tag).__name__}")
    yield


@contextmanager
def super_kernel(scope: str, options: str = ""):
    """On Ascend, fuses the operators inside into one super kernel; vnpu runs them one by one."""
    if not isinstance(scope, str):
        raise TypeError(f"scope must be a str, got {type(scope).__name__}")
    yield
