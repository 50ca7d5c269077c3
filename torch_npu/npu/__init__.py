"""``torch.npu``: devices, lazy initialisation, memory, streams, random numbers and AMP.

Importing this module, ``is_available()`` and ``device_count()`` do not initialise the device;
the first tensor, ``init()`` or any call that needs the device does (``_lazy_init``).
"""

import threading
import traceback

from torch._utils import _LazySeedTracker

from torch_npu import _C

_initialized = False
_tls = threading.local()
_initialization_lock = threading.Lock()
_queued_calls = []  # don't invoke these until initialization occurs
_lazy_seed_tracker = _LazySeedTracker()
default_generators = ()

_FORK_MESSAGE = (
    "Cannot re-initialize NPU in forked subprocess. To use NPU with multiprocessing, "
    "you must use the 'spawn' start method"
)


class DeferredNpuCallError(Exception):
    pass


def is_available() -> bool:
    """True when at least one (virtual) NPU is visible. Does not initialise the device."""
    return _C._device_count() > 0


def device_count() -> int:
    """Number of visible NPUs (VNPU_DEVICE_COUNT filtered by ASCEND_RT_VISIBLE_DEVICES)."""
    return _C._device_count()


def _is_in_bad_fork() -> bool:
    return _C._is_in_bad_fork()


def is_initialized() -> bool:
    return _initialized and not _is_in_bad_fork()


def _lazy_call(callable, **kwargs):
    if is_initialized():
        callable()
    elif kwargs.get("seed_all", False):
        _lazy_seed_tracker.queue_seed_all(callable, traceback.format_stack())
    elif kwargs.get("seed", False):
        _lazy_seed_tracker.queue_seed(callable, traceback.format_stack())
    else:
        _queued_calls.append((callable, traceback.format_stack()))


def _lazy_init():
    global _initialized, default_generators
    if is_initialized() or hasattr(_tls, "is_initializing"):
        return
    with _initialization_lock:
        if is_initialized():
            return
        if _is_in_bad_fork():
            raise RuntimeError(_FORK_MESSAGE)
        if device_count() == 0:
            reason = _C._device_config_error()
            raise RuntimeError("No NPU device is available: " + (reason or "VNPU_DEVICE_COUNT is 0"))
        from torch_npu.npu._acl_init import acl_op_init_mode, check_acl_init_config

        check_acl_init_config()
        acl_op_init_mode()
        _C._init()
        from torch_npu.npu._oom_snapshot import enable_from_environment

        enable_from_environment()
        default_generators = tuple(_C._default_generator(i) for i in range(device_count()))
        _tls.is_initializing = True
        queued = [c for c in _lazy_seed_tracker.get_calls() if c] + _queued_calls
        try:
            for queued_call, orig_traceback in queued:
                try:
                    queued_call()
                except Exception as e:
                    msg = (
                        f"NPU call failed lazily at initialization with error: {str(e)}\n\n"
                        f"NPU call was originally invoked at:\n\n{''.join(orig_traceback)}"
                    )
                    raise DeferredNpuCallError(msg) from e
        finally:
            delattr(_tls, "is_initializing")
        _initialized = True


def init() -> None:
    """Initialise the NPU state (normally done lazily)."""
    _lazy_init()


from torch_npu.npu import aclnn, amp, backends, npugraph_ex  # noqa: E402,F401
from torch_npu.npu._host_func import (  # noqa: E402, F401 (torch_npu.npu's private host-function API)
    _launch_host_func,
    _subscribe_report,
    _unsubscribe_report,
)
from torch_npu.npu._legacy_types import storages as _legacy_storages  # noqa: E402,F401
from torch_npu.npu._legacy_types import tensor_types as _legacy_tensor_types  # noqa: E402
from torch_npu.npu._npurt import npurt  # noqa: E402
from torch_npu.npu._reliability import restart_device, stop_device  # noqa: E402
from torch_npu.npu.autocast_utils import (  # noqa: E402
    get_autocast_dtype,
    is_autocast_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from torch_npu.npu.deterministic import (  # noqa: E402
    _get_deterministic_level,  # noqa: F401  (torch_npu.npu._get_deterministic_level)
    disable_deterministic_with_backward,
    enable_deterministic_with_backward,
    set_deterministic_level,
)
from torch_npu.npu.graphs import (  # noqa: E402
    NPUGraph,
    NpuGraphOpHandler,
    graph,
    graph_pool_handle,
    graph_task_group_begin,
    graph_task_group_end,
    graph_task_update_begin,
    graph_task_update_end,
    is_current_stream_capturing,
    make_graphed_callables,
    register_npu_graph_handler,
    super_kernel_scope_begin,
    super_kernel_scope_end,
)
from torch_npu.npu.memory import (  # noqa: E402
    MemPool,
    NPUPluggableAllocator,
    caching_allocator_alloc,
    caching_allocator_delete,
    change_current_allocator,
    empty_cache,
    empty_virt_addr_cache,
    get_allocator_backend,
    get_per_process_memory_fraction,
    host_empty_cache,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
    use_mem_pool,
)
from torch_npu.npu.mstx import mstx  # noqa: E402  (the class shadows the submodule, as in torch_npu)
from torch_npu.npu.npu_config import (  # noqa: E402
    CubeMathType,
    are_compatible_impl_enabled,
    config,
    conv,
    finalize_dump,
    get_device_limit,
    get_mm_bmm_format_nd,
    get_stream_limit,
    init_dump,
    is_jit_compile_false,
    matmul,
    reset_stream_limit,
    set_aoe,
    set_compile_mode,
    set_device_limit,
    set_dump,
    set_mm_bmm_format_nd,
    set_option,
    set_stream_limit,
    use_compatible_impl,
)
from torch_npu.npu.random import (  # noqa: E402
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from torch_npu.npu.streams import (  # noqa: E402
    Event,
    ExternalEvent,
    ExternalStream,
    Stream,
    StreamContext,
    SyncLaunchStream,
    current_stream,
    default_stream,
    set_stream,
    stream,
)
from torch_npu.npu.utils import (  # noqa: E402
    _aclnn_reselect_static_kernel,  # noqa: F401
    _get_device_index,  # noqa: F401 (torch.npu._get_device_index, as torch.cuda has it)
    can_device_access_peer,
    check_uce_in_memory,
    clear_npu_overflow_flag,
    current_blas_handle,
    current_device,
    device,
    device_of,
    get_amp_supported_dtype,
    get_device_capability,
    get_device_name,
    get_device_properties,
    get_npu_overflow_flag,
    get_soc_version,
    get_sync_debug_mode,
    ipc_collect,
    is_bf16_supported,
    is_support_inf_nan,
    npu_check_overflow,
    obfuscation_calculate,
    obfuscation_finalize,
    obfuscation_initialize,
    set_device,
    set_op_timeout_ms,
    set_sync_debug_mode,
    stress_detect,
    synchronize,
    utilization,
)

globals().update(_legacy_storages)


def __getattr__(name):
    if name == "precompile":
        from torch_npu.utils._vnpu_extensions import precompile

        return precompile
    raise AttributeError(f"module 'torch_npu.npu' has no attribute {name!r}")


globals().update(_legacy_tensor_types)

__all__ = (
    [
        "is_available",
        "device_count",
        "is_initialized",
        "init",
        "current_device",
        "set_device",
        "device",
        "device_of",
        "synchronize",
        "get_device_name",
        "get_device_properties",
        "get_device_capability",
        "can_device_access_peer",
        "is_bf16_supported",
        "get_amp_supported_dtype",
        "Stream",
        "Event",
        "StreamContext",
        "current_stream",
        "default_stream",
        "set_stream",
        "stream",
        "get_rng_state",
        "get_rng_state_all",
        "set_rng_state",
        "set_rng_state_all",
        "manual_seed",
        "manual_seed_all",
        "seed",
        "seed_all",
        "initial_seed",
        "default_generators",
        "caching_allocator_alloc",
        "caching_allocator_delete",
        "empty_cache",
        "get_per_process_memory_fraction",
        "set_per_process_memory_fraction",
        "max_memory_allocated",
        "max_memory_cached",
        "max_memory_reserved",
        "mem_get_info",
        "memory_allocated",
        "memory_cached",
        "memory_reserved",
        "memory_snapshot",
        "memory_stats",
        "memory_stats_as_nested_dict",
        "memory_summary",
        "reset_accumulated_memory_stats",
        "reset_max_memory_allocated",
        "reset_max_memory_cached",
        "reset_peak_memory_stats",
        "amp",
        "check_uce_in_memory",
        "clear_npu_overflow_flag",
        "current_blas_handle",
        "get_npu_overflow_flag",
        "get_soc_version",
        "get_sync_debug_mode",
        "ipc_collect",
        "is_support_inf_nan",
        "npu_check_overflow",
        "obfuscation_calculate",
        "obfuscation_finalize",
        "obfuscation_initialize",
        "set_op_timeout_ms",
        "set_sync_debug_mode",
        "stress_detect",
        "utilization",
        "ExternalEvent",
        "ExternalStream",
        "SyncLaunchStream",
        "MemPool",
        "NPUPluggableAllocator",
        "change_current_allocator",
        "empty_virt_addr_cache",
        "get_allocator_backend",
        "host_empty_cache",
        "host_memory_stats",
        "host_memory_stats_as_nested_dict",
        "reset_accumulated_host_memory_stats",
        "reset_peak_host_memory_stats",
        "use_mem_pool",
        "CubeMathType",
        "are_compatible_impl_enabled",
        "config",
        "conv",
        "matmul",
        "finalize_dump",
        "init_dump",
        "set_dump",
        "get_device_limit",
        "set_device_limit",
        "get_stream_limit",
        "set_stream_limit",
        "reset_stream_limit",
        "get_mm_bmm_format_nd",
        "set_mm_bmm_format_nd",
        "is_jit_compile_false",
        "set_compile_mode",
        "set_aoe",
        "set_option",
        "use_compatible_impl",
        "restart_device",
        "stop_device",
        "get_autocast_dtype",
        "is_autocast_enabled",
        "set_autocast_dtype",
        "set_autocast_enabled",
        "disable_deterministic_with_backward",
        "enable_deterministic_with_backward",
        "set_deterministic_level",
        "NPUGraph",
        "NpuGraphOpHandler",
        "graph",
        "graph_pool_handle",
        "graph_task_group_begin",
        "graph_task_group_end",
        "graph_task_update_begin",
        "graph_task_update_end",
        "is_current_stream_capturing",
        "make_graphed_callables",
        "register_npu_graph_handler",
        "super_kernel_scope_begin",
        "super_kernel_scope_end",
        "mstx",
        "npurt",
    ]
    + sorted(_legacy_storages)
    + sorted(_legacy_tensor_types)
)
