"""Device memory: the caching allocator (torch_npu's rounding and pools, statistics, capacity and OOM,
settings), pinned host memory, memory pools, raw allocations, pluggable allocators, host memory
statistics and allocation history in PyTorch's snapshot format."""

import gc
import pickle
import shutil
import textwrap

import pytest
import torch
from error_cases import raises_exactly
from subprocess_helpers import last_line, run_python

import torch_npu

MiB = 2**20


@pytest.fixture(autouse=True)
def _clean_allocator():
    gc.collect()
    torch.npu.empty_cache()
    torch.npu.reset_peak_memory_stats()
    yield
    gc.collect()
    torch.npu.empty_cache()


def test_rounding_adds_torch_npus_32_byte_pad_then_rounds_to_512():
    base = torch.npu.memory_allocated()
    sizes = {1: 512, 480: 512, 481: 1024, 4000: 4096, 4064: 4096, 4065: 4608, 4096: 4608}
    for nbytes, rounded in sizes.items():
        t = torch.empty(nbytes, dtype=torch.uint8, device="npu")
        assert torch.npu.memory_allocated() - base == rounded, nbytes
        assert torch.npu.memory_stats()["requested_bytes.all.current"] >= nbytes
        del t


def test_small_and_large_pools_and_segment_sizes(fresh_allocator):
    dev = "npu:7"
    assert torch.npu.memory_reserved(dev) == 0
    small = torch.empty(1 * MiB - 32, dtype=torch.uint8, device=dev)  # exactly 1 MiB after the pad
    stats = torch.npu.memory_stats(dev)
    assert stats["reserved_bytes.small_pool.current"] == 2 * MiB
    assert stats["allocated_bytes.small_pool.current"] == 1 * MiB
    medium = torch.empty(1 * MiB, dtype=torch.uint8, device=dev)  # large pool, 20 MiB segment
    assert torch.npu.memory_stats(dev)["reserved_bytes.large_pool.current"] == 20 * MiB
    fits = torch.empty(11 * MiB, dtype=torch.uint8, device=dev)  # split from that segment's rest
    assert torch.npu.memory_stats(dev)["reserved_bytes.large_pool.current"] == 20 * MiB
    big = torch.empty(30 * MiB, dtype=torch.uint8, device=dev)  # own segment, 2 MiB rounding
    stats = torch.npu.memory_stats(dev)
    assert stats["reserved_bytes.large_pool.current"] == 20 * MiB + 32 * MiB
    assert stats["segment.all.current"] == 3
    del small, medium, fits, big


def test_freed_blocks_are_reused_and_split_blocks_are_adjacent(fresh_allocator):
    dev = "npu:6"
    assert torch.npu.memory_reserved(dev) == 0
    a = torch.empty(1024, device=dev)  # 4096 bytes -> 4608-byte block
    b = torch.empty(1024, device=dev)
    assert b.data_ptr() - a.data_ptr() == 4608
    stats = torch.npu.memory_stats(dev)
    assert stats["inactive_split.all.current"] == 1  # the rest of the 2 MiB segment
    address = a.data_ptr()
    del a
    c = torch.empty(1000, device=dev)  # fits the freed block
    assert c.data_ptr() == address
    assert torch.npu.memory_stats(dev)["segment.all.current"] == 1
    del b, c


def test_memory_made_by_cpu_kernels_is_counted():
    base = torch.npu.memory_allocated()
    x = torch.ones(1000, device="npu")  # the CPU kernel allocates the result
    after_ones = torch.npu.memory_allocated()
    y = x * 2
    after_mul = torch.npu.memory_allocated()
    assert (after_ones - base, after_mul - after_ones) == (4096, 4096)
    del x, y
    assert torch.npu.memory_allocated() == base


def test_reserved_memory_is_cached_until_empty_cache():
    # in a fresh interpreter: a worker's earlier tests may leave free space in their segments that 4 MiB would reuse
    proc = run_python("""
        import torch, torch_npu
        x = torch.empty(1024 * 1024, device="npu")  # 4 MiB: a 20 MiB large-pool segment of its own
        print(torch.npu.memory_allocated(), torch.npu.memory_reserved())
        del x
        print(torch.npu.memory_allocated(), torch.npu.memory_reserved())
        torch.npu.empty_cache()
        print(torch.npu.memory_reserved())
    """)
    assert proc.stdout.split() == [str(4 * MiB + 512), str(20 * MiB), "0", str(20 * MiB), "0"]  # (+32 bytes, rounded)


def test_peak_and_reset():
    x = torch.empty(10 * MiB, dtype=torch.uint8, device="npu")
    del x
    peak = torch.npu.max_memory_allocated()
    assert peak >= 10 * MiB
    torch.npu.reset_peak_memory_stats()
    assert torch.npu.max_memory_allocated() == torch.npu.memory_allocated()
    assert torch.npu.max_memory_reserved() == torch.npu.memory_reserved()


def test_scratch_a_cpu_kernel_gives_back_counts_for_capacity_but_not_for_the_peak():
    x = torch.randn(1000, 1000, device="npu")
    torch.npu.reset_peak_memory_stats()
    before = torch.npu.memory_stats()
    m = x.median()
    after = torch.npu.memory_stats()
    # The CPU's median selects in a copy of x, taken from the npu pools (capacity and OOM see it)...
    assert after["allocated_bytes.all.allocated"] - before["allocated_bytes.all.allocated"] >= x.numel() * 4
    # ...and given back before the operator returns: only its 512-byte result is part of the peaks.
    assert after["allocated_bytes.all.current"] - before["allocated_bytes.all.current"] == 512
    for stat in ("allocated_bytes", "active_bytes", "requested_bytes", "allocation"):
        assert after[f"{stat}.all.peak"] == after[f"{stat}.all.current"], stat
    assert m.device.type == "npu"


def test_memory_stats_use_cuda_key_names():
    x = torch.empty(10, device="npu")
    stats = torch.npu.memory_stats()
    for key in (
        "allocated_bytes.all.current",
        "allocated_bytes.small_pool.peak",
        "reserved_bytes.large_pool.freed",
        "active_bytes.all.allocated",
        "inactive_split_bytes.all.current",
        "requested_bytes.all.current",
        "segment.all.current",
        "allocation.all.current",
        "num_alloc_retries",
        "num_ooms",
        "num_device_alloc",
        "num_device_free",
        "max_split_size",
        "oversize_allocations.current",
    ):
        assert key in stats, key
    assert list(stats) == sorted(stats)
    assert torch.accelerator.memory_allocated() == torch.npu.memory_allocated()
    assert (
        torch.npu.memory_stats_as_nested_dict()["allocated_bytes"]["all"]["current"]
        == stats["allocated_bytes.all.current"]
    )
    del x


def test_snapshot_agrees_with_statistics():
    keep = [torch.empty(n, device="npu:1") for n in (10, 1000, 300000, 3000000)]
    torch.npu.set_device(1)
    stats = torch.npu.memory_stats()
    segments = [s for s in torch.npu.memory_snapshot() if s["device"] == 1]
    assert sum(s["total_size"] for s in segments) == stats["reserved_bytes.all.current"]
    assert sum(s["allocated_size"] for s in segments) == stats["allocated_bytes.all.current"]
    blocks = [b for s in segments for b in s["blocks"]]
    assert sum(b["state"] == "active_allocated" for b in blocks) == len(keep)
    assert {s["segment_type"] for s in segments} == {"small", "large"}
    del keep


def test_memory_summary_is_a_table():
    # a fresh process: the table's figures are the device's, including what other tests of a worker still hold
    proc = run_python(
        """
        import torch, torch_npu
        x = torch.empty(1000, device="npu")
        print(torch.npu.memory_summary())
        """
    )
    assert "| Allocated memory      |   4096 B   |" in proc.stdout


def test_memory_summary_header_is_torch_npus_centred_layout():
    proc = run_python(
        """
        import torch, torch_npu
        try:
            torch.empty(2**50, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError:
            pass
        print(torch.npu.memory_summary(0))
    """
    )
    lines = proc.stdout.splitlines()
    assert lines[:6] == [
        "|" + "=" * 75 + "|",
        "|                  PyTorch NPU memory summary, device ID 0                  |",
        "|" + "-" * 75 + "|",
        "|            NPU OOMs: 1             |        npuMalloc retries: 1          |",
        "|" + "=" * 75 + "|",
        "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |",
    ]
    table = [line for line in lines if line.startswith("|")]
    assert all(len(line) == 77 for line in table)
    # a rule opens every metric, the two oversize rows included, as in CUDA's summary
    assert sum(line == "|" + "-" * 75 + "|" for line in table) == 1 + 9 + 2


def test_mem_get_info_reports_capacity_minus_reserved():
    x = torch.empty(1000, device="npu")
    free, total = torch.npu.mem_get_info()
    assert total == 64 * 2**30
    assert free == total - torch.npu.memory_reserved()
    assert torch.accelerator.get_memory_info(0) == (free, total)
    del x


def test_out_of_memory_raises_and_the_process_keeps_working():
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(70 * 2**30, dtype=torch.uint8, device="npu")
    message = str(info.value).splitlines()[0]
    assert message.startswith("NPU out of memory. Tried to allocate 70.00 GiB (NPU 0; 64.00 GiB total capacity; ")
    assert message.endswith(
        " reserved in total by PyTorch) If reserved memory is >> allocated memory try "
        "setting max_split_size_mb to avoid fragmentation."
    )
    assert torch.npu.memory_stats()["num_ooms"] >= 1
    y = torch.ones(4, device="npu") + 1
    assert y.sum().item() == 8


def test_out_of_memory_message_is_exact():
    proc = run_python(
        """
        import torch, torch_npu
        a = torch.empty(40 * 2**20, dtype=torch.uint8, device="npu")
        try:
            torch.empty(30 * 2**20, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError as e:
            print(str(e).splitlines()[0])
        print(torch.npu.memory_stats()["num_alloc_retries"], torch.npu.memory_stats()["num_ooms"])
    """,
        env={"VNPU_DEVICE_MEMORY": "64MB"},
    )
    assert proc.stdout.strip().splitlines() == [
        "NPU out of memory. Tried to allocate 30.00 MiB (NPU 0; 64.00 MiB total capacity; 40.00 MiB already "
        "allocated; 40.00 MiB current active; 22.00 MiB free; 42.00 MiB reserved in total by PyTorch) If reserved "
        "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.",
        "1 1",
    ]


def test_cached_blocks_are_released_before_giving_up():
    proc = run_python(
        """
        import torch, torch_npu
        a = torch.empty(40 * 2**20, dtype=torch.uint8, device="npu")
        del a                                  # cached, still reserved
        b = torch.empty(50 * 2**20, dtype=torch.uint8, device="npu")   # needs the cache released
        s = torch.npu.memory_stats()
        print(s["num_alloc_retries"], s["num_ooms"], torch.npu.memory_reserved() // 2**20)
    """,
        env={"VNPU_DEVICE_MEMORY": "64MB"},
    )
    assert last_line(proc) == "1 0 52"


def test_more_than_1eb():
    with pytest.raises(torch.OutOfMemoryError, match="NPU out of memory. Tried to allocate more than 1EB memory."):
        torch.empty(2**61, dtype=torch.uint8, device="npu")


def test_host_that_cannot_back_the_request_raises_the_npu_oom():
    proc = run_python(
        """
        import torch, torch_npu
        try:
            torch.empty(4 * 2**40, dtype=torch.uint8, device="npu")    # 4 TiB: the device has room
        except torch.OutOfMemoryError as e:
            print(str(e))
        print("still working:", torch.ones(3, device="npu").sum().item())
    """,
        env={"VNPU_DEVICE_MEMORY": "8TB"},
    )
    out = proc.stdout
    assert out.startswith("NPU out of memory. Tried to allocate 4096.00 GiB (NPU 0; 8192.00 GiB total capacity;")
    assert "[vnpu] This host cannot back it: npu memory lives in host memory" in out
    assert out.strip().endswith("still working: 3.0")


def test_a_copy_to_the_host_that_the_host_cannot_hold_raises_the_cpu_allocators_error_with_a_note():
    x = torch.zeros(1, device="npu").expand(2**42)  # 16 TiB to copy from one element
    with pytest.raises(RuntimeError) as err:
        x.cpu()
    message = str(err.value)
    assert message.startswith(f"DefaultCPUAllocator: can't allocate memory: you tried to allocate {2**44} bytes.")
    assert "[vnpu] This host cannot hold the copy: npu memory lives in host memory" in message
    assert torch.ones(3, device="npu").sum().item() == 3.0


def test_per_process_memory_fraction():
    proc = run_python(
        """
        import torch, torch_npu
        torch.npu.set_per_process_memory_fraction(0.5)
        print(torch.npu.get_per_process_memory_fraction())
        torch.empty(20 * 2**20, dtype=torch.uint8, device="npu")
        try:
            torch.empty(40 * 2**20, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError as e:
            print(str(e).splitlines()[0])
    """,
        env={"VNPU_DEVICE_MEMORY": "64MB"},
    )
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "0.5"
    assert "; 32.00 MiB allowed; " in lines[1]


def test_per_process_memory_fraction_errors():
    with pytest.raises(TypeError, match="Invalid type for fraction argument, must be `float`") as info:
        torch.npu.set_per_process_memory_fraction(1)
    assert "ERR00002 PTA invalid type" in str(info.value)
    with pytest.raises(ValueError, match=r"Invalid fraction value: 1.5. Allowed range: 0~1"):
        torch.npu.set_per_process_memory_fraction(1.5)


def test_caching_allocator_alloc_and_delete():
    before = torch.npu.memory_allocated()
    ptr = torch.npu.caching_allocator_alloc(4096)
    assert isinstance(ptr, int) and ptr != 0
    assert torch.npu.memory_allocated() - before == 4608
    torch.npu.caching_allocator_delete(ptr)
    assert torch.npu.memory_allocated() == before
    with pytest.raises(ValueError, match="was not allocated by caching_allocator_alloc"):
        torch.npu.caching_allocator_delete(ptr)
    with pytest.raises(TypeError):
        torch.npu.caching_allocator_alloc(-1)


def test_no_npu_memory_caching():
    proc = run_python(
        """
        import torch, torch_npu
        x = torch.empty(1000, device="npu")
        print(torch.npu.memory_reserved(), torch.npu.memory_allocated())
        del x
        print(torch.npu.memory_reserved())
    """,
        env={"PYTORCH_NO_NPU_MEMORY_CACHING": "1"},
    )
    assert proc.stdout.split() == ["4096", "4096", "0"]
    proc = run_python(
        "import torch, torch_npu; torch.ones(1, device='npu')",
        env={"PYTORCH_NO_NPU_MEMORY_CACHING": "yes"},
        check=False,
    )
    assert (
        "PYTORCH_NO_NPU_MEMORY_CACHING='yes' is invalid: set it to 1 to disable the caching allocator (or 0)"
        in proc.stderr
    )


def test_pinned_memory():
    assert torch.empty(4, pin_memory=True).is_pinned()
    pinned = torch.arange(6.0).pin_memory()
    assert pinned.is_pinned() and not torch.arange(6.0).is_pinned()
    on_npu = pinned.to("npu", non_blocking=True)
    assert torch.equal(on_npu.cpu(), torch.arange(6.0))
    back = on_npu.to("cpu", non_blocking=True)
    assert torch.equal(back, torch.arange(6.0))
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.arange(8.0)), batch_size=4, pin_memory=True
    )
    assert all(batch[0].is_pinned() for batch in loader)
    before = torch_npu._C._pinned_host_stats()["num_host_alloc"]
    del pinned
    again = torch.arange(6.0).pin_memory()  # reuses the cached pinned block
    assert torch_npu._C._pinned_host_stats()["num_host_alloc"] == before
    del again


def test_pin_memory_rejects_npu_tensors():
    with pytest.raises(RuntimeError, match="Only dense CPU tensors can be pinned"):
        torch.empty(2, device="npu", pin_memory=True)


def test_storage_resize_allocates_on_npu():
    storage = torch.ones(2, device="npu:2").untyped_storage()
    storage.resize_(64)
    assert storage.nbytes() == 64 and storage.device == torch.device("npu", 2)


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


# Bad input: the exact first line of the error (torch_npu's "[ERROR] ... ERRxxyyy" suffix follows it)
MEMORY_ERRORS = [
    (
        lambda: torch.npu.set_per_process_memory_fraction(2.0),
        ValueError,
        "Invalid fraction value: 2.0. Allowed range: 0~1",
    ),
    (
        lambda: torch.npu.set_per_process_memory_fraction("half"),
        TypeError,
        "Invalid type for fraction argument, must be `float`",
    ),
    (
        lambda: torch.npu.caching_allocator_alloc(-1),
        TypeError,
        "Invalid type for size argument, must be a non-negative int",
    ),
    (
        lambda: torch.npu.caching_allocator_delete(0x1000),
        ValueError,
        "caching_allocator_delete: 0x1000 was not allocated by caching_allocator_alloc",
    ),
    (
        lambda: torch.npu.MemPool(allocator="malloc"),
        TypeError,
        "MemPool allocator must be an NPUPluggableAllocator or None",
    ),
    (
        lambda: torch.npu.NPUPluggableAllocator("/nonexistent.so", "a", "f"),
        FileNotFoundError,
        "NPUPluggableAllocator: /nonexistent.so does not exist",
    ),
    (
        lambda: torch.npu.change_current_allocator("malloc"),
        TypeError,
        "change_current_allocator expects an NPUPluggableAllocator",
    ),
    (
        lambda: torch.npu.memory._record_memory_history(enabled="on"),
        ValueError,
        "enabled must be None, 'state' or 'all', but got 'on'",
    ),
    (
        lambda: torch.npu.memory._record_memory_history(stacks="cpp"),
        ValueError,
        "stacks must be 'python' or 'all', but got 'cpp'",
    ),
]


@pytest.mark.parametrize("call,kind,message", MEMORY_ERRORS, ids=[c[2][:48] for c in MEMORY_ERRORS])
def test_memory_error_message(call, kind, message):
    raises_exactly(call, kind, message)


@pytest.mark.parametrize(
    "call",
    [
        torch.npu.memory_allocated,
        torch.npu.max_memory_allocated,
        torch.npu.memory_reserved,
        torch.npu.max_memory_reserved,
        torch.npu.memory_stats,
        torch.npu.reset_peak_memory_stats,
        torch.npu.reset_max_memory_allocated,
        torch.npu.reset_accumulated_memory_stats,
    ],
)
def test_memory_statistics_of_a_device_past_the_count_raise_the_allocators_error(call):
    torch.ones(1, device="npu")  # initialised
    with pytest.raises(RuntimeError) as err:
        call(device="npu:8")
    assert str(err.value).splitlines()[0] == "Invalid device argument."
    assert "ERR00001 PTA invalid parameter" in str(err.value)
