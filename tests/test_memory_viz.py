"""torch_npu.npu._memory_viz turns the npu allocator's snapshots into flame graphs and plots."""

import torch

import torch_npu
from torch_npu.npu import _memory_viz


def _allocate_in_a_named_function():
    return torch.empty(3000, device="npu")


def _snapshot_with_one_live_block():
    torch.npu.memory._record_memory_history(max_entries=1000)
    try:
        kept = _allocate_in_a_named_function()
        snapshot = torch.npu.memory._snapshot()
    finally:
        torch.npu.memory._record_memory_history(enabled=None)
    return kept, snapshot


def test_memory_flame_graph_names_the_allocating_function_and_its_bytes():
    kept, snapshot = _snapshot_with_one_live_block()
    lines = _memory_viz.memory(snapshot, format_flamegraph_func=lambda text: text).splitlines()
    ours = [line for line in lines if "_allocate_in_a_named_function" in line]
    assert len(ours) == 1
    prefix, size = ours[0].rsplit(" ", 1)
    (segment,) = [s for s in snapshot["segments"] if any(b.get("frames") for b in s["blocks"])]
    assert prefix.startswith(f"stream_{segment['stream']};active_allocated;")
    assert int(size) == kept.untyped_storage().nbytes()


def test_segments_flame_graph_accounts_every_byte_of_every_segment():
    _kept, snapshot = _snapshot_with_one_live_block()
    text = _memory_viz.segments(snapshot, format_flamegraph_func=lambda text: text)
    by_segment = {}
    for line in text.splitlines():
        prefix, size = line.rsplit(" ", 1)
        stream, segment = prefix.split(";")[:2]
        assert stream.startswith("stream_")
        address = int(segment.removeprefix("seg_"))
        by_segment[address] = by_segment.get(address, 0) + int(size)
    sizes = {s["address"]: s["total_size"] for s in snapshot["segments"]}
    assert by_segment == sizes


def test_trace_plot_embeds_the_snapshot_for_pytorchs_viewer():
    _kept, snapshot = _snapshot_with_one_live_block()
    html = _memory_viz.trace_plot(snapshot)
    assert html.lstrip().startswith("<!DOCTYPE html>")
    assert "MemoryViz.js" in html
    assert "Active Memory Timeline" in html


def test_helpers_are_torch_npus_names():
    block = {"frames": [{"line": 7, "filename": "/a/b.py", "name": "f"}], "requested_size": 10, "size": 512}
    assert _memory_viz._block_extra(block) == (block["frames"], 10)
    assert _memory_viz._frame_fmt(block["frames"][0]) == "b.py:7:f"
    assert _memory_viz.__all__ == ["segments", "memory"]
    assert torch_npu.npu._memory_viz is _memory_viz
