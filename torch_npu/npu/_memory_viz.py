"""torch_npu.npu._memory_viz: flame graphs and plots of the npu caching allocator's snapshots.

The snapshot vnpu's allocator writes (`torch.npu.memory._snapshot()`) has PyTorch's layout, so
the formatting helpers are PyTorch's own; torch_npu names the flame-graph hook of `segments` and
`memory` `format_flamegraph_func`.
"""

from torch.cuda._memory_viz import (  # noqa: F401  (torch_npu's module exposes these helpers)
    _block_extra,
    _block_extra_legacy,
    _frame_filter,
    _frame_fmt,
    _frames_fmt,
    _write_blocks,
    compare,
    format_flamegraph,
    segment_plot,
    trace_plot,
)
from torch.cuda._memory_viz import memory as _memory
from torch.cuda._memory_viz import segments as _segments

__all__ = ["segments", "memory"]


def segments(snapshot, format_flamegraph_func=format_flamegraph):
    """Flame graph of every segment's blocks, grouped by stream and segment address."""
    return _segments(snapshot, format_flamegraph=format_flamegraph_func)


def memory(snapshot, format_flamegraph_func=format_flamegraph):
    """Flame graph of the blocks in use, grouped by stream."""
    return _memory(snapshot, format_flamegraph=format_flamegraph_func)
