"""export_memory_timeline: PyTorch's memory timeline of the last recorded session, for an npu device.

PyTorch's memory profiler classifies every tensor of the device (parameters, gradients, optimizer state,
activations, inputs, temporaries ...) from its host events: the operators with their inputs (record_shapes),
the allocations (profile_memory) and the modules (with_stack or with_modules). vnpu's host recording is
PyTorch's kineto profiler and the npu allocator reports to it, so the timeline is PyTorch's own, read from
that recording. As with torch_npu and PyTorch, the file's suffix picks the format: `.html` (a plot),
`.raw.json.gz` (each memory event), `.json` / `.json.gz` (times and sizes per category).
"""

import gzip
import os
import tempfile

from torch.profiler._memory_profiler import MemoryProfile, MemoryProfileTimeline

__all__ = ["export_memory_timeline"]


def export_memory_timeline(result, output_path, device):
    timeline = MemoryProfileTimeline(MemoryProfile(result))
    if output_path.endswith(".html"):
        timeline.export_memory_timeline_html(output_path, device)
        return
    if not output_path.endswith(".gz"):
        timeline.export_memory_timeline(output_path, device)
        return
    with tempfile.TemporaryDirectory() as scratch:
        plain = os.path.join(scratch, "timeline.json")
        if output_path.endswith("raw.json.gz"):
            timeline.export_memory_timeline_raw(plain, device)
        else:
            timeline.export_memory_timeline(plain, device)
        with open(plain) as source, gzip.open(output_path, "wt") as target:
            target.writelines(source)
