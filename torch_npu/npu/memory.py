"""NPU memory: caching-allocator statistics, capacity and cache control.

Statistics use CUDA's key names (``allocated_bytes.all.current``...), so tools written for
``torch.cuda.memory_stats`` read them unchanged.
"""

import collections
import contextlib
import os
import pickle
import sys
from collections.abc import Iterator
from typing import Any

import torch

import torch_npu
from torch_npu import _C
from torch_npu.npu.utils import _get_device_index
from torch_npu.utils._error_code import ErrCode, pta_error

_device_t = torch.device | str | int | None

__all__ = [
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "empty_cache",
    "mem_get_info",
    "MemPool",
    "use_mem_pool",
    "NPUPluggableAllocator",
    "change_current_allocator",
    "get_allocator_backend",
    "empty_virt_addr_cache",
    "host_empty_cache",
    "host_memory_stats",
    "host_memory_stats_as_nested_dict",
    "reset_accumulated_host_memory_stats",
    "reset_peak_host_memory_stats",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "memory_cached",
    "max_memory_cached",
    "memory_snapshot",
    "memory_summary",
    "set_per_process_memory_fraction",
    "get_per_process_memory_fraction",
]

_held_allocations: dict[int, torch.Tensor] = {}


def _index(device: _device_t) -> int:
    return _get_device_index(device, optional=True)


def empty_cache() -> None:
    """Return the cached, unused memory of every NPU to the host."""
    if torch_npu.npu.is_initialized():
        _C._empty_cache()


def memory_stats_as_nested_dict(device: _device_t = None) -> dict[str, Any]:
    if not torch_npu.npu.is_initialized():
        return {}
    return torch._C._accelerator_getDeviceStats(_index(device))


def memory_stats(device: _device_t = None) -> dict[str, Any]:
    """The caching allocator's statistics for a device, flattened and sorted by key."""
    result = []

    def flatten(prefix, value):
        if isinstance(value, dict):
            for k, v in value.items():
                flatten(f"{prefix}.{k}" if prefix else k, v)
        else:
            result.append((prefix, value))

    flatten("", memory_stats_as_nested_dict(device))
    result.sort()
    return collections.OrderedDict(result)


def reset_accumulated_memory_stats(device: _device_t = None) -> None:
    torch_npu.npu._lazy_init()
    torch._C._accelerator_resetAccumulatedStats(_index(device))


def reset_peak_memory_stats(device: _device_t = None) -> None:
    torch_npu.npu._lazy_init()
    torch._C._accelerator_resetPeakStats(_index(device))


def reset_max_memory_allocated(device: _device_t = None) -> None:
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device: _device_t = None) -> None:
    reset_peak_memory_stats(device)


def memory_allocated(device: _device_t = None) -> int:
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: _device_t = None) -> int:
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: _device_t = None) -> int:
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: _device_t = None) -> int:
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def memory_cached(device: _device_t = None) -> int:
    """Deprecated alias of memory_reserved."""
    return memory_reserved(device)


def max_memory_cached(device: _device_t = None) -> int:
    """Deprecated alias of max_memory_reserved."""
    return max_memory_reserved(device)


def mem_get_info(device: _device_t = None) -> tuple[int, int]:
    """(free, total) device memory in bytes; total is the SoC's capacity (VNPU_DEVICE_MEMORY
    overrides it) and free is what the caching allocator has not reserved."""
    torch_npu.npu._lazy_init()
    return tuple(_C._mem_get_info(_index(device)))


def set_per_process_memory_fraction(fraction: float, device: _device_t = None) -> None:
    """Limit this process's caching allocator on a device to ``fraction`` of its capacity."""
    torch_npu.npu._lazy_init()
    index = _index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`" + pta_error(ErrCode.TYPE))
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1" + pta_error(ErrCode.VALUE))
    _C._set_memory_fraction(fraction, index)


def get_per_process_memory_fraction(device: _device_t = None) -> float:
    torch_npu.npu._lazy_init()
    return _C._get_memory_fraction(_index(device))


def caching_allocator_alloc(size: int, device: _device_t = None, stream: object | None = None) -> int:
    """Allocate ``size`` bytes from the caching allocator; returns the address."""
    torch_npu.npu._lazy_init()
    if device is None:
        device = _C._current_device()
    index = _index(device)
    if not isinstance(size, int) or size < 0:
        raise TypeError("Invalid type for size argument, must be a non-negative int" + pta_error(ErrCode.TYPE))
    block = torch.empty(size, dtype=torch.uint8, device=torch.device("npu", index))
    address = block.data_ptr()
    _held_allocations[address] = block
    return address


def caching_allocator_delete(mem_ptr: int) -> None:
    """Free memory obtained from caching_allocator_alloc."""
    if _held_allocations.pop(mem_ptr, None) is None:
        raise ValueError(
            f"caching_allocator_delete: {mem_ptr:#x} was not allocated by caching_allocator_alloc"
            + pta_error(ErrCode.VALUE)
        )


def memory_snapshot() -> list[dict]:
    """Segments and blocks of every device's caching allocator (torch.cuda.memory_snapshot's format)."""
    if not torch_npu.npu.is_initialized():
        return []
    return _C._memory_snapshot()


_backend = "native"


def _set_allocator_settings(env: str) -> None:
    """Change allocator settings at run time, in PYTORCH_NPU_ALLOC_CONF's syntax ("expandable_segments:True",
    "garbage_collection_threshold:0.8,max_split_size_mb:64"): the keys given replace theirs, the others stay;
    allocations from then on follow them."""
    _C._npu_npuCachingAllocator_set_allocator_settings(env)


def get_allocator_backend() -> str:
    """The allocator in use: "native" (the caching allocator) or "pluggable" after
    change_current_allocator()."""
    return _backend


def empty_virt_addr_cache() -> None:
    """Release virtual address ranges kept for expandable segments (vnpu maps whole segments; the
    physical memory is released by empty_cache)."""
    empty_cache()


def host_empty_cache() -> None:
    """Return cached pinned host memory to the OS."""
    _C._empty_pinned_cache()


def host_memory_stats_as_nested_dict() -> dict:
    s = _C._pinned_host_stats()
    return {
        "num_host_alloc": s["num_host_alloc"],
        "num_host_free": s["num_host_free"],
        "allocations": {"current": s["allocations"], "peak": s["allocations_peak"]},
        "allocated_bytes": {"current": s["allocated_bytes"], "peak": s["allocated_bytes_peak"]},
        "reserved_bytes": {"current": s["reserved_bytes"], "peak": s["reserved_bytes_peak"]},
    }


def host_memory_stats() -> dict:
    """Statistics of the pinned host memory allocator, flattened ("allocated_bytes.current"...)."""
    flat = []
    for key, value in host_memory_stats_as_nested_dict().items():
        if isinstance(value, dict):
            flat.extend((f"{key}.{k}", v) for k, v in value.items())
        else:
            flat.append((key, value))
    return collections.OrderedDict(sorted(flat))


def reset_accumulated_host_memory_stats() -> None:
    _C._reset_pinned_host_accumulated()


def reset_peak_host_memory_stats() -> None:
    _C._reset_pinned_host_peaks()


class MemPool:
    """A memory pool of its own: allocations made inside ``use_mem_pool(pool)`` come from it, and
    its memory stays reserved (empty_cache does not release it) until the pool is deleted."""

    def __init__(self, allocator=None):
        if allocator is not None and not isinstance(allocator, NPUPluggableAllocator):
            raise TypeError("MemPool allocator must be an NPUPluggableAllocator or None" + pta_error(ErrCode.TYPE))
        self._allocator = allocator
        self._id = _C._create_mem_pool()
        self._users = 0

    @property
    def id(self):
        return (0, self._id)

    @property
    def allocator(self):
        return self._allocator

    def use_count(self):
        """Contexts currently using the pool, plus the pool itself."""
        return 1 + self._users

    def snapshot(self):
        """memory_snapshot() restricted to this pool's segments."""
        return [s for s in memory_snapshot() if tuple(s["segment_pool_id"]) == self.id]

    def __del__(self):
        try:
            _C._release_mem_pool(self._id)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device: torch.device | str | int | None = None) -> Iterator[None]:
    """Route this thread's allocations on `device` to `pool` inside the block."""
    torch_npu.npu._lazy_init()
    index = _index(device)
    previous = _C._thread_mem_pool(index)
    _C._set_thread_mem_pool(index, pool._id)
    pool._users += 1
    try:
        yield
    finally:
        pool._users -= 1
        _C._set_thread_mem_pool(index, previous)


class _NPUAllocator:
    """An allocator change_current_allocator() can install."""

    def __init__(self, functions):
        self._functions = functions

    def allocator(self):
        return self._functions


class NPUPluggableAllocator(_NPUAllocator):
    """Device memory from a shared library's functions:
    ``void* alloc(ssize_t size, int device, aclrtStream stream)`` and
    ``void free(void* ptr, ssize_t size, int device, aclrtStream stream)``."""

    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str):
        if not os.path.exists(path_to_so_file):
            raise FileNotFoundError(
                f"NPUPluggableAllocator: {path_to_so_file} does not exist" + pta_error(ErrCode.NOT_FOUND)
            )
        super().__init__(_C._load_pluggable_allocator(path_to_so_file, alloc_fn_name, free_fn_name))


def change_current_allocator(allocator: _NPUAllocator) -> None:
    """Make `allocator` serve every npu allocation. Must run before the first npu allocation."""
    if not isinstance(allocator, _NPUAllocator):
        raise TypeError("change_current_allocator expects an NPUPluggableAllocator" + pta_error(ErrCode.TYPE))
    global _backend
    _C._use_pluggable_allocator(allocator.allocator())
    _backend = "pluggable"


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None):
    """Start (enabled="all": every event and the stack of each allocated block; "state": the stacks only) or
    stop (enabled=None) recording allocator events, with the Python stack of each (stacks="python" or "all"),
    for _snapshot()."""
    if enabled not in (None, "state", "all", True, False):
        raise ValueError(f"enabled must be None, 'state' or 'all', but got {enabled!r}")
    if stacks not in ("python", "all", None):
        raise ValueError(f"stacks must be 'python' or 'all', but got {stacks!r}")
    on = enabled not in (None, False)
    stacks_on = on and context is not None and stacks is not None
    _C._record_memory_history(on, enabled != "state", stacks_on, min(int(max_entries), 2**62))


def _snapshot(device=None):
    """The allocator state and history in PyTorch's memory-snapshot format (memory_viz reads it); after
    _record_memory_history(enabled="state") the blocks' stacks only, with no history."""
    history = _C._memory_history()
    frames_by_address = {entry["addr"]: entry["frames"] for entry in _C._memory_live_allocations()}
    segments = memory_snapshot()
    for segment in segments:
        for block in segment["blocks"]:
            if block["state"] == "active_allocated":
                block["frames"] = frames_by_address.get(block["address"], [])
    count = torch_npu.npu.device_count()
    traces = [[] for _ in range(count)]
    for entry in history:
        device_index = entry.pop("device")
        if 0 <= device_index < count:
            traces[device_index].append(entry)
    return {"segments": segments, "device_traces": traces}


def _dump_snapshot(filename="dump_snapshot.pickle"):
    """Pickle _snapshot() to `filename` (open it with torch.cuda._memory_viz or pytorch.org/memory_viz)."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def _format_size(sz: int, pref_sz: int) -> str:
    prefixes = ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"]
    prefix = prefixes[0]
    for new_prefix in prefixes[1:]:
        if pref_sz < 768 * 1024:
            break
        prefix = new_prefix
        sz //= 1024
        pref_sz /= 1024
    return f"{sz:6d} {prefix}"


def _format_count(cnt: int, pref_cnt: int) -> str:
    prefixes = [" ", "K", "M"]
    prefix = prefixes[0]
    for new_prefix in prefixes[1:]:
        if pref_cnt < 750 * 1000:
            break
        prefix = new_prefix
        cnt //= 1000
        pref_cnt /= 1000
    return f"{cnt:7d} {prefix} "


def memory_summary(device: _device_t = None, abbreviated: bool = False) -> str:
    """A human-readable table of the caching allocator's statistics for a device."""
    index = _index(device)
    stats = memory_stats(index)
    metrics = [
        ("allocated_bytes", "Allocated memory", _format_size),
        ("active_bytes", "Active memory", _format_size),
        ("requested_bytes", "Requested memory", _format_size),
        ("reserved_bytes", "NPU reserved memory", _format_size),
        ("inactive_split_bytes", "Non-releasable memory", _format_size),
        ("allocation", "Allocations", _format_count),
        ("active", "Active allocs", _format_count),
        ("segment", "NPU reserved segments", _format_count),
        ("inactive_split", "Non-releasable allocs", _format_count),
    ]
    line, rule = "=" * 75, "-" * 75
    # torch_npu's header: CUDA's centred layout with the NPU words (its own column widths)
    lines = [
        line,
        f" {'':16} PyTorch NPU memory summary, device ID {index:<18d} ",
        rule,
        f"  {'':9} NPU OOMs: {stats.get('num_ooms', 0):<13d} | {'':6} npuMalloc retries: "
        f"{stats.get('num_alloc_retries', 0):<9d}  ",
        line,
        "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ",
    ]
    pools = (
        [("all", None)]
        if abbreviated
        else [("all", None), ("large_pool", "      from large pool"), ("small_pool", "      from small pool")]
    )
    for key, name, formatter in metrics:
        lines.append(rule)
        reference = None  # the "all" row sets the unit the pool rows are shown in
        for pool, pool_label in pools:
            prefix = f"{key}.{pool}."
            row = [stats.get(prefix + field, 0) for field in ("current", "peak", "allocated", "freed")]
            reference = reference or row
            cells = " | ".join(formatter(value, ref) for value, ref in zip(row, reference))
            lines.append(f" {pool_label or name:<21} | {cells} ")
    for key, name in (("oversize_allocations", "Oversize allocations"), ("oversize_segments", "Oversize NPU segments")):
        lines.append(rule)
        row = [stats.get(f"{key}.{field}", 0) for field in ("current", "peak", "allocated", "freed")]
        lines.append(f" {name:<21} | " + " | ".join(_format_count(v, v) for v in row) + " ")
    lines.append(line)
    return "|" + "|\n|".join(lines) + "|\n"
