"""PYTORCH_NPU_ALLOC_CONF: the settings the caching allocator honours (read in a fresh interpreter, as the
allocator reads them once) and the clear error each invalid one gives, in torch_npu's words."""

import json

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


def test_settings_changed_at_run_time():
    # torch.npu.memory._set_allocator_settings: the keys given replace theirs, the others stay, allocations from then
    # on follow them; invalid settings raise and change nothing (a fresh interpreter: the settings are per process)
    proc = run_python(
        """
        import json, torch, torch_npu
        from torch_npu import _C
        out = {}
        def large():  # 1.3 MiB, large pool: reserves one segment of large_segment_size
            x = torch.empty(1363148, dtype=torch.uint8, device="npu")
            reserved = torch.npu.memory_reserved()
            del x
            torch.npu.empty_cache()
            return reserved
        out["before"] = large()
        torch.npu.memory._set_allocator_settings("large_segment_size_mb:40")
        out["after"] = large()
        torch.npu.memory._set_allocator_settings("max_split_size_mb:100")
        config = _C._allocator_config()
        out["kept"] = [config["large_segment_size"], config["max_split_size"], config["source"]]
        for bad in ("foo:1", "expandable_segments:True"):  # the second conflicts with max_split_size_mb
            try:
                torch.npu.memory._set_allocator_settings(bad)
            except (ValueError, RuntimeError) as e:
                out[bad] = [type(e).__name__, str(e).splitlines()[0]]
        out["unchanged"] = _C._allocator_config() == config
        torch.npu.memory._set_allocator_settings("per_process_memory_fraction:0.001")
        try:
            torch.empty(1 << 30, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError as e:
            out["fraction"] = "allowed" in str(e)
        print(json.dumps(out))
        """
    )
    out = json.loads(proc.stdout.splitlines()[-1])
    assert (out["before"], out["after"]) == (20 << 20, 40 << 20)
    assert out["kept"] == [40 << 20, 100 << 20, "torch_npu.npu.memory._set_allocator_settings"]
    assert out["foo:1"] == ["ValueError", "Unrecognized key 'foo' in NPU allocator config."]
    assert out["expandable_segments:True"] == [
        "RuntimeError",
        "`max_split_size_mb` or `garbage_collection_threshold`, cannot be enabled with `expandable_segments`, "
        "please set `expandable_segments` to `False`.",
    ]
    assert out["unchanged"] is True and out["fraction"] is True


def test_pytorchs_device_generic_entry_reaches_the_npu_settings():
    # torch._C._accelerator_setAllocatorSettings (what torch.cuda.memory._set_allocator_settings calls, so code
    # migrated from CUDA) hands the string to the device's parser, as it does to torch_npu's
    proc = run_python(
        """
        import json, warnings, torch, torch_npu
        from torch_npu import _C
        out = {}
        torch._C._accelerator_setAllocatorSettings("large_segment_size_mb:40")  # a key only NPU settings have
        x = torch.empty(1363148, dtype=torch.uint8, device="npu")
        out["reserved"] = torch.npu.memory_reserved()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            torch.cuda.memory._set_allocator_settings("expandable_segments:True")
        config = _C._allocator_config()
        out["config"] = [config["large_segment_size"], config["expandable_segments"], config["source"]]
        try:
            torch._C._accelerator_setAllocatorSettings("foo:1")
        except ValueError as e:
            out["error"] = str(e).splitlines()[0]
        out["unchanged"] = _C._allocator_config() == config
        print(json.dumps(out))
        """
    )
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["reserved"] == 40 << 20
    assert out["config"] == [40 << 20, True, "torch._C._accelerator_setAllocatorSettings"]
    assert out["error"] == "Unrecognized key 'foo' in Accelerator allocator config." and out["unchanged"] is True
