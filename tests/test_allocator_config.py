"""PYTORCH_NPU_ALLOC_CONF: the settings the caching allocator honours (read in a fresh interpreter, as the
allocator reads them once) and the clear error each invalid one gives, in torch_npu's words."""

import pytest
from subprocess_helpers import run_python


@pytest.mark.parametrize(
    "conf,expected",
    [
        ("max_split_size_mb:100", "max_split_size 104857600"),
        ("large_segment_size_mb:40", "reserved 41943040"),
        # large_segment_size_mb outranks the deprecated segment_size_mb, in either order
        ("segment_size_mb:50,large_segment_size_mb:100", "reserved 104857600"),
        ("large_segment_size_mb:100,segment_size_mb:50", "reserved 104857600"),
        ("roundup_power2_divisions:4", "allocated 1572864"),
        ("expandable_segments:False, garbage_collection_threshold:0.6", "reserved 20971520"),
    ],
)
def test_alloc_conf_settings_are_honoured(conf, expected):
    proc = run_python(
        """
        import torch, torch_npu
        x = torch.empty(1363148, dtype=torch.uint8, device="npu")      # 1.3 MiB, large pool
        s = torch.npu.memory_stats()
        print("max_split_size", s["max_split_size"])
        print("reserved", s["reserved_bytes.all.current"])
        print("allocated", s["allocated_bytes.all.current"])
    """,
        env={"PYTORCH_NPU_ALLOC_CONF": conf},
    )
    assert expected in proc.stdout.splitlines()


@pytest.mark.parametrize(
    "conf,error,message",
    [
        ("foo:1", "ValueError", "Unrecognized key 'foo' in NPU allocator config."),
        ("max_split_size_mb:10", "RuntimeError", "CachingAllocator option max_split_size_mb too small, must be > 20"),
        ("expandable_segments:yes", "RuntimeError", "Expected a single True/False argument for expandable_segments"),
        (
            "garbage_collection_threshold:2",
            "RuntimeError",
            "garbage_collect_threshold is invalid, set it in (0.0, 1.0)",
        ),
        (
            "expandable_segments:True,max_split_size_mb:100",
            "RuntimeError",
            "`max_split_size_mb` or `garbage_collection_threshold`, cannot be enabled with `expandable_segments`, please "
            "set `expandable_segments` to `False`.",
        ),
        (
            "large_segment_size_mb:50,max_split_size_mb:30",
            "RuntimeError",
            "CachingAllocator option max_split_size_mb (30) must be greater than or equal to large_segment_size_mb (50)",
        ),
        (
            "large_segment_size_mb:5",
            "RuntimeError",
            "CachingAllocator option large_segment_size_mb error, must be > 10, dtype is int",
        ),  # fmt: skip
        (
            "base_addr_aligned_kb:64",
            "RuntimeError",
            "CachingAllocator option base_addr_aligned_kb error, must be [0~16], dtype is int",
        ),
    ],
)
def test_invalid_alloc_conf_is_a_clear_error(conf, error, message):
    proc = run_python(
        """
        import torch, torch_npu
        for attempt in range(2):                       # the error repeats, it does not leave a broken state
            try:
                torch.ones(1, device="npu")
            except Exception as e:
                print(type(e).__name__, str(e).splitlines()[0])
    """,
        env={"PYTORCH_NPU_ALLOC_CONF": conf},
    )
    assert proc.stdout.strip().splitlines() == [f"{error} {message}"] * 2
