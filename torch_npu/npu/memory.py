"""NPU memory: caching-allocator statistics, capacity and cache control.

Statistics use CUDA's key names (``allocated_bytes.all.current``...), so tools written for
``torch.cuda.memory_stats`` read them unchanged.
"""
import collections
from typing import Any, Dict, Optional, Tuple, Union

import torch

import torch_npu
from torch_npu import _C
from torch_npu.npu.utils import _get_device_index
from torch_npu.utils._error_code import ErrCode, pta_error

_device_t = Union[torch.device, str, int, None]

__all__ = [
    "caching_allocator_alloc", "caching_allocator_delete", "empty_cache", "mem_get_info",
    "memory_stats", "memory_stats_as_nested_dict", "reset_accumulated_memory_stats",
    "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "memory_cached", "max_memory_cached", "memory_snapshot", "memory_summary",
    "set_per_process_memory_fraction", "get_per_process_memory_fraction",
]

_held_allocations: Dict[int, torch.Tensor] = {}


def _index(device: _device_t) -> int:
    return _get_device_index(device, optional=True)


def empty_cache() -> None:
    """Return the cached, unused memory of every NPU to the host."""
    if torch_npu.npu.is_initialized():
        torch._C._accelerator_emptyCache()


def memory_stats_as_nested_dict(device: _device_t = None) -> Dict[str, Any]:
    if not torch_npu.npu.is_initialized():
        return {}
    return torch._C._accelerator_getDeviceStats(_index(device))


def memory_stats(device: _device_t = None) -> Dict[str, Any]:
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


def mem_get_info(device: _device_t = None) -> Tuple[int, int]:
    """(free, total) device memory in bytes; total is the SoC's capacity (VNPU_DEVICE_MEMORY
    overrides it) and free is what the caching allocator has not reserved."""
    torch_npu.npu._lazy_init()
    return tuple(_C._mem_get_info(_index(device)))


def set_per_process_memory_fraction(fraction, device: _device_t = None) -> None:
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


def caching_allocator_alloc(size: int, device: _device_t = None, stream=None) -> int:
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
        raise ValueError(f"caching_allocator_delete: {mem_ptr:#x} was not allocated by caching_allocator_alloc"
                         + pta_error(ErrCode.VALUE))


def memory_snapshot():
    """Segments and blocks of every device's caching allocator (torch.cuda.memory_snapshot's format)."""
    if not torch_npu.npu.is_initialized():
        return []
    return _C._memory_snapshot()


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
    pools = [("all", "")] if abbreviated else [("all", ""), ("large_pool", "      from large pool"),
                                                ("small_pool", "      from small pool")]
    line = "=" * 75
    rule = "-" * 75
    lines = [line, f" {'PyTorch NPU memory summary, device ID ' + str(index):<73s} ", rule,
             f" {'NPU OOMs: ' + str(stats.get('num_ooms', 0)):<36s}|"
             f" {'npuMalloc retries: ' + str(stats.get('num_alloc_retries', 0)):<35s} ",
             line, "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ", rule]
    for key, name, formatter in metrics:
        for pool, pool_label in pools:
            prefix = f"{key}.{pool}."
            current = stats.get(prefix + "current", 0)
            peak = stats.get(prefix + "peak", 0)
            allocated = stats.get(prefix + "allocated", 0)
            freed = stats.get(prefix + "freed", 0)
            label = name if pool == "all" else pool_label
            lines.append(f" {label:<21} | {formatter(current, current)} | {formatter(peak, peak)} | "
                         f"{formatter(allocated, allocated)} | {formatter(freed, freed)} ")
        lines.append(rule)
    for key, name in (("oversize_allocations", "Oversize allocations"), ("oversize_segments", "Oversize NPU segments")):
        current = stats.get(f"{key}.current", 0)
        peak = stats.get(f"{key}.peak", 0)
        allocated = stats.get(f"{key}.allocated", 0)
        freed = stats.get(f"{key}.freed", 0)
        lines.append(f" {name:<21} | {_format_count(current, current)} | {_format_count(peak, peak)} | "
                     f"{_format_count(allocated, allocated)} | {_format_count(freed, freed)} ")
    lines.append(line)
    return "|" + "|\n|".join(lines) + "|\n"
