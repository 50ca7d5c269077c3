"""Memory APIs beyond statistics: memory pools, raw allocations, pluggable allocators, host
memory statistics and allocation history in PyTorch's snapshot format."""

import pickle
import shutil
import textwrap

import pytest
import torch
from subprocess_helpers import run_python


def test_mem_pool_routes_allocations_and_keeps_its_memory():
    pool = torch.npu.MemPool()
    assert pool.use_count() == 1
    with torch.npu.use_mem_pool(pool):
        assert pool.use_count() == 2
        x = torch.empty(1 << 20, dtype=torch.uint8, device="npu")
    outside = torch.empty(1 << 20, dtype=torch.uint8, device="npu")
    segments = pool.snapshot()
    assert segments and all(tuple(s["segment_pool_id"]) == pool.id for s in segments)
    assert any(b["address"] == x.data_ptr() for s in segments for b in s["blocks"])
    assert not any(b["address"] == outside.data_ptr() for s in segments for b in s["blocks"])
    del x
    torch.npu.empty_cache()
    assert pool.snapshot(), "a pool's memory stays reserved until the pool goes away"


def test_mem_pool_rejects_foreign_allocators():
    with pytest.raises(TypeError, match="NPUPluggableAllocator"):
        torch.npu.MemPool(allocator=object())


def test_caching_allocator_alloc_and_delete():
    before = torch.npu.memory_allocated()
    ptr = torch.npu.caching_allocator_alloc(4096)
    assert isinstance(ptr, int) and ptr != 0
    assert torch.npu.memory_allocated() - before >= 4096
    torch.npu.caching_allocator_delete(ptr)
    assert torch.npu.memory_allocated() == before
    with pytest.raises(ValueError, match="was not allocated"):
        torch.npu.caching_allocator_delete(ptr)
    with pytest.raises(TypeError):
        torch.npu.caching_allocator_alloc(-1)


def test_allocator_backend_and_virtual_address_cache():
    assert torch.npu.get_allocator_backend() == "native"
    torch.npu.empty_virt_addr_cache()


def test_host_memory_statistics_follow_pinned_allocations():
    torch.npu.reset_peak_host_memory_stats()
    x = torch.empty(1 << 16, dtype=torch.uint8).pin_memory()
    stats = torch.npu.host_memory_stats()
    assert stats["allocated_bytes.current"] >= 1 << 16
    assert stats["allocated_bytes.peak"] >= stats["allocated_bytes.current"]
    nested = torch.npu.host_memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["current"] == stats["allocated_bytes.current"]
    del x
    torch.npu.host_empty_cache()
    torch.npu.reset_accumulated_host_memory_stats()


def test_memory_history_snapshot_has_pytorch_format_and_frames(tmp_path):
    torch.npu.memory._record_memory_history(max_entries=1000)
    try:

        def allocate_here():
            return torch.empty(12345, device="npu")

        x = allocate_here()
        del x
        snap = torch.npu.memory._snapshot()
    finally:
        torch.npu.memory._record_memory_history(enabled=None)
    assert set(snap) == {"segments", "device_traces"}
    trace = snap["device_traces"][0]
    actions = [e["action"] for e in trace]
    assert "alloc" in actions and ("free_requested" in actions or "free_completed" in actions)
    alloc = [e for e in trace if e["action"] == "alloc" and e["size"] >= 12345 * 4][-1]
    assert any(f["name"] == "allocate_here" for f in alloc["frames"])
    assert {"addr", "size", "stream", "frames", "action"} <= set(alloc)
    # PyTorch's own viewer reads it
    from torch.cuda import _memory_viz

    html = _memory_viz.trace_plot(snap)
    assert "<html" in html.lower() or "<script" in html.lower()
    path = tmp_path / "snap.pickle"
    torch.npu.memory._dump_snapshot(str(path))
    assert set(pickle.loads(path.read_bytes())) == {"segments", "device_traces"}


def test_memory_history_argument_checks():
    with pytest.raises(ValueError):
        torch.npu.memory._record_memory_history(enabled="sometimes")
    with pytest.raises(ValueError):
        torch.npu.memory._record_memory_history(stacks="cpp-only")


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a C compiler to build the allocator library")
def test_pluggable_allocator_serves_npu_memory(tmp_path):
    source = tmp_path / "alloc.c"
    source.write_text(
        textwrap.dedent("""
        #include <stdlib.h>
        #include <sys/types.h>
        static int n_alloc = 0, n_free = 0;
        void* my_alloc(ssize_t size, int device, void* stream) { n_alloc++; return malloc(size); }
        void my_free(void* ptr, ssize_t size, int device, void* stream) { n_free++; free(ptr); }
        int allocs(void) { return n_alloc; }
        int frees(void) { return n_free; }
    """)
    )
    lib = tmp_path / "liballoc.so"
    import subprocess

    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(source)], check=True, timeout=60)
    out = run_python(f"""
        import ctypes, torch, torch_npu
        alloc = torch.npu.NPUPluggableAllocator({str(lib)!r}, "my_alloc", "my_free")
        torch.npu.change_current_allocator(alloc)
        counters = ctypes.CDLL({str(lib)!r})
        x = torch.arange(1000.0, device="npu")
        y = (x * 2).sum().item()
        print(counters.allocs() > 0, y == 999000.0)
        del x
        print(counters.frees() > 0)
        print(torch.npu.get_allocator_backend())
    """)
    assert out.stdout.split() == ["True", "True", "True", "pluggable"]


def test_pluggable_allocator_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        torch.npu.NPUPluggableAllocator(str(tmp_path / "missing.so"), "a", "f")
    with pytest.raises(TypeError):
        torch.npu.change_current_allocator("malloc")
