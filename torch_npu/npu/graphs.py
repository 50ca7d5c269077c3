"""NPU graphs: capture a sequence of npu operators once, replay it many times.

Capture records every operator issued on the capture stream (and runs it, so captured outputs are
valid afterwards). ``replay()`` runs the recorded operators again, in C++, on the same tensors: the
captured input tensors are read as they are now and results are written into the captured output
tensors, exactly like an ACL graph replay. Memory allocated during capture comes from the graph's
pool and stays reserved while the graph lives. Synchronising operations (``.item()``, copies to
the CPU, ``synchronize()``) are refused while capturing.
"""

import functools
import gc
import os
import threading
import warnings
from collections.abc import Callable
from typing import Optional

import torch

import torch_npu
from torch_npu import _C
from torch_npu.npu._super_kernel import (
    DEBUG_OPTIONS,
    OPTIMIZE_OPTIONS,
    checked_options,
    super_kernel_scope_begin,
    super_kernel_scope_end,
)
from torch_npu.utils._error_code import ErrCode, graph_error, pta_error

__all__ = [
    "NPUGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
    "graph_task_group_begin",
    "graph_task_group_end",
    "graph_task_update_begin",
    "graph_task_update_end",
    "super_kernel_scope_begin",
    "super_kernel_scope_end",
    "NpuGraphOpHandler",
    "register_npu_graph_handler",
]


def is_current_stream_capturing() -> bool:
    """True when the current stream of this thread is capturing an NPU graph."""
    return _C._current_stream_capturing()


def graph_pool_handle() -> tuple[int, int]:
    """A memory-pool id that several graphs can share (pass it as ``pool=``)."""
    return (0, _C._create_mem_pool())


_CAPTURE_MODES = ("global", "thread_local", "relaxed")
_graph_handlers = {}
_capturing = {}  # (stream_id, device) -> the NPUGraph capturing there
_pool_users = {}  # memory-pool id -> graphs holding it; the pool is released with its last graph


def _hold_pool(pool_id):
    _pool_users[pool_id] = _pool_users.get(pool_id, 0) + 1


def _drop_pool(pool_id):
    remaining = _pool_users.get(pool_id, 0) - 1
    if remaining > 0:
        _pool_users[pool_id] = remaining
        return
    _pool_users.pop(pool_id, None)
    _C._release_mem_pool(pool_id)


_thread_pools = threading.local()  # per thread: (device, pool allocated from before) of each redirection


def _begin_allocate_to_pool(device, pool):
    """Allocations of this thread on `device` come from `pool` until _end_allocate_to_pool; the pool is held
    until _release_pool (the allocator side of PyTorch's graph trees warming functions up in their pool)."""
    _hold_pool(pool[1])
    if not hasattr(_thread_pools, "stack"):
        _thread_pools.stack = []
    _thread_pools.stack.append((device, _C._thread_mem_pool(device)))
    _C._set_thread_mem_pool(device, pool[1])


def _end_allocate_to_pool(device, pool):
    stack = getattr(_thread_pools, "stack", [])
    for i in range(len(stack) - 1, -1, -1):
        if stack[i][0] == device:
            _C._set_thread_mem_pool(device, stack.pop(i)[1])
            return
    raise RuntimeError(f"endAllocateToPool: this thread is not allocating to pool {tuple(pool)} on npu:{device}")


def _release_pool(device, pool):
    _drop_pool(pool[1])


@functools.cache
def _task_queue_mode():
    """TASK_QUEUE_ENABLE as the first capture reads it (torch_npu reads it once)."""
    return os.environ.get("TASK_QUEUE_ENABLE", "1")


def _check_capture_settings():
    """The settings torch_npu refuses a capture under, with its errors: the launch pipeline's mode 2 and pinned host
    memory from expandable segments (its pinned blocks would not stay in the graph's private pool)."""
    if _task_queue_mode() == "2":
        raise RuntimeError(
            "Do not support TASK_QUEUE_ENABLE = 2 during NPU graph capture, please export TASK_QUEUE_ENABLE=1/0."
            + pta_error(ErrCode.NOT_SUPPORT)
        )
    if _C._allocator_config()["pin_memory_expandable_segments"]:
        raise RuntimeError(
            "ACLGraph capture is not supported when pin_memory_expandable_segments=True. "
            "NPUExpandableHostAllocatorImpl overrides allocate/free/empty_cache/record_event and does not integrate "
            "with the base CachingHostAllocator's private pool mechanism, which would cause capture-time pinned "
            "blocks to be incorrectly recycled and lead to data corruption on graph replay. Please unset "
            "pin_memory_expandable_segments in PYTORCH_NPU_ALLOC_CONF to use ACLGraph with pin_memory, or avoid "
            "pin_memory calls inside capture regions." + pta_error(ErrCode.NOT_SUPPORT)
        )


class NPUGraph:
    """A captured sequence of npu operators (torch.npu.NPUGraph)."""

    def __init__(self):
        self._recording = _C._GraphRecording()
        self._pool = None
        self._device = None
        self._super_kernel_options = None
        self._captured = False  # a capture ended successfully (and was not reset since)
        self._stream_key = None
        self._dispatch_records = []  # handled operators captured with auto_dispatch_capture (_graph_dispatch)
        self._dispatch_mode = None
        self._generators = []  # generators besides the device's default one that replays draw from (_graph_rng)
        self._auto_dispatch_capture = False

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if capture_error_mode not in _CAPTURE_MODES:
            raise RuntimeError(
                "Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, got "
                + str(capture_error_mode)
            )
        _check_capture_settings()
        if self._captured:
            raise RuntimeError(
                "This NPUGraph instance already owns a captured graph. To capture a new graph, create a new instance."
            )
        stream = torch.npu.current_stream()
        if stream == torch.npu.default_stream(stream.device_index):
            raise RuntimeError(
                "NPU graphs must be captured on a non-default stream. (However, after capture, it's "
                "ok to replay them on the default stream.)" + graph_error(ErrCode.NOT_SUPPORT)
            )
        self._device = stream.device_index
        if self._pool is not None:
            _release_pool(self._device, self._pool)  # a graph captured again after reset() gives up its previous pool
        self._pool = tuple(pool) if pool is not None else graph_pool_handle()
        _begin_allocate_to_pool(self._device, self._pool)  # held until the graph is deleted or captured again
        self._recording.begin(stream.stream_id, stream.device_index)
        self._stream_key = (stream.stream_id, stream.device_index)
        _capturing[self._stream_key] = self
        self._dispatch_records = []
        from torch_npu.npu import _graph_rng

        _graph_rng.hold_generators(self, [torch_npu.npu.default_generators[self._device], *self._generators])
        if self._auto_dispatch_capture:  # set by torch.npu.graph(..., auto_dispatch_capture=True)
            from torch_npu.npu import _graph_dispatch

            self._dispatch_mode = _graph_dispatch.AutoDispatchCapture(self, _graph_handlers)
            self._dispatch_mode.__enter__()

    def capture_end(self):
        stream = torch.npu.current_stream()
        if not self._recording.capturing() or self._stream_key != (stream.stream_id, stream.device_index):
            raise RuntimeError("Capture must end on the same stream it began on.")
        if self._dispatch_mode is not None:
            self._dispatch_mode.__exit__(None, None, None)
            self._dispatch_mode = None
        from torch_npu.npu import _graph_rng

        try:
            self._recording.end()
            self._captured = True
        finally:
            _graph_rng.release_generators(self)
            _capturing.pop(getattr(self, "_stream_key", None), None)
            _end_allocate_to_pool(self._device, self._pool)

    def register_generator_state(self, generator):
        """Treat `generator` as graph-safe, as the device's default generator is: capturing does not advance it,
        replays draw from its state when they run (see _graph_rng)."""
        if not any(g is generator for g in self._generators):
            self._generators.append(generator)

    def replay(self):
        """Run the captured operators again."""
        if not self._captured:
            raise RuntimeError("Called NPUGraph::replay without a preceding successful capture.")
        self._recording.replay()

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            try:
                self._recording.reset()
                _drop_pool(pool[1])
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass

    def reset(self):
        """Drop the captured operators (and with them the graph's hold on their tensors)."""
        self._recording.reset()
        self._captured = False

    def pool(self):
        """The graph's memory-pool id (pass it to another graph to share memory)."""
        if not self._captured:
            raise RuntimeError("Called NPUGraph::pool() without a preceding successful capture.")
        return self._pool

    def debug_dump(self, debug_path):
        """Write the captured operators, one per line, to debug_path (without a capture: a warning, no file)."""
        if not self._captured:
            warnings.warn("Called NPUGraph::debug_dump without a preceding successful capture.", stacklevel=2)
            return
        folder = os.path.dirname(os.path.abspath(debug_path))
        os.makedirs(folder, exist_ok=True)
        with open(debug_path, "w") as f:
            f.write(f"# NPUGraph with {self._recording.size()} operators\n")
            for line in self._recording.describe():
                f.write(line + "\n")

    def update(self, cpu_update_input):
        """Give captured operators new host-side arguments before a replay. `cpu_update_input` is a
        list with one dict per captured operator of a registered kind (register_npu_graph_handler),
        in capture order, mapping argument names to new values (ints, floats or int lists)."""
        if not isinstance(cpu_update_input, (list, tuple)):
            raise TypeError("cpu_update_input must be a list of dicts" + graph_error(ErrCode.TYPE))
        from torch_npu.npu import _graph_dispatch

        grouped = [(r.start, r.end) for r in self._dispatch_records]
        tasks = {i for name in _graph_handlers for i in self._recording.records_of(name)}
        tasks = [i for i in tasks if not any(start <= i < end for start, end in grouped)]
        records = sorted([(i, i) for i in tasks] + [(r.start, r) for r in self._dispatch_records], key=lambda x: x[0])
        if len(records) != len(cpu_update_input):
            raise RuntimeError(
                f"NPUGraph.update got {len(cpu_update_input)} updates for {len(records)} captured "
                "operators of registered kinds" + graph_error(ErrCode.PARAM)
            )
        for (_, record), update in zip(records, cpu_update_input):
            if isinstance(record, _graph_dispatch.DispatchRecord):
                record.handler.update_args(record, update)
                _graph_dispatch.reissue(self, record)
                continue
            for name, value in update.items():
                if isinstance(value, (list, tuple)):
                    self._recording.update_int_list(record, name, [int(v) for v in value])
                elif isinstance(value, bool) or isinstance(value, int):
                    self._recording.update_int(record, name, int(value))
                elif isinstance(value, float):
                    self._recording.update_float(record, name, value)
                else:
                    raise TypeError(
                        f"NPUGraph.update: cannot update {name} with {type(value).__name__}" + graph_error(ErrCode.TYPE)
                    )

    def super_kernel_optimize(self, optimize_options=None, debug_options=None):
        """On Ascend, fuse the captured kernels into super kernels (fewer launches, same results).
        vnpu replays operators one by one; the options are kept for debug_dump."""
        options = (
            checked_options("optimize_options", optimize_options, OPTIMIZE_OPTIONS),
            checked_options("debug_options", debug_options, DEBUG_OPTIONS),
        )
        if not self._captured:
            raise RuntimeError("Called NPUGraph::super_kernel_optimize without a preceding successful capture.")
        self._super_kernel_options = options


class graph:
    """Context manager capturing the enclosed npu work into `npu_graph`."""

    default_capture_stream: Optional["torch_npu.npu.Stream"] = None

    def __init__(
        self, npu_graph, pool=None, stream=None, auto_dispatch_capture=False, capture_error_mode: str = "global"
    ):
        if not isinstance(npu_graph, NPUGraph):
            raise TypeError("torch.npu.graph expects a torch.npu.NPUGraph" + graph_error(ErrCode.TYPE))
        if self.__class__.default_capture_stream is None:
            self.__class__.default_capture_stream = torch.npu.Stream()
        self.pool = () if pool is None else (pool,)
        self.capture_stream = stream if stream is not None else self.__class__.default_capture_stream
        self.stream_ctx = torch.npu.stream(self.capture_stream)
        self.npu_graph = npu_graph
        self.capture_error_mode = capture_error_mode
        self.auto_dispatch_capture = auto_dispatch_capture

    def __enter__(self):
        torch.npu.synchronize()
        if os.environ.get("TORCH_NPUGRAPH_GC") == "1":
            gc.collect()
        self.stream_ctx.__enter__()
        self.npu_graph._auto_dispatch_capture = self.auto_dispatch_capture
        try:
            self.npu_graph.capture_begin(*self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException as error:  # a refused capture leaves the caller on the stream it was on
            self.stream_ctx.__exit__(type(error), error, error.__traceback__)
            raise

    def __exit__(self, exc_type, exc_value, traceback):
        try:
            self.npu_graph.capture_end()
        finally:
            self.stream_ctx.__exit__(exc_type, exc_value, traceback)


_task_groups = {}


def graph_task_group_begin(stream: torch.Stream) -> None:
    """Start a group of captured tasks that graph_task_update_* can later re-issue."""
    recording = _capturing_graph(stream)
    _task_groups[id(stream)] = (recording, recording.size())


def graph_task_group_end(stream: torch.Stream) -> tuple:
    """End the group; returns the handle graph_task_update_begin takes."""
    if id(stream) not in _task_groups:
        raise RuntimeError("graph_task_group_end without graph_task_group_begin" + graph_error(ErrCode.PARAM))
    recording, start = _task_groups.pop(id(stream))
    return (recording, start, recording.size())


_updates = {}


def graph_task_update_begin(stream: torch.Stream, handle: object) -> None:
    """Operators issued on `stream` until graph_task_update_end replace the group's tasks."""
    recording, start, end = handle
    replacement = _C._GraphRecording()
    replacement.begin(stream.stream_id, stream.device_index)
    _updates[id(stream)] = (recording, start, end, replacement)


def graph_task_update_end(stream: torch.Stream) -> None:
    if id(stream) not in _updates:
        raise RuntimeError("graph_task_update_end without graph_task_update_begin" + graph_error(ErrCode.PARAM))
    recording, start, end, replacement = _updates.pop(id(stream))
    replacement.end()
    recording.splice(start, end, replacement)


def _capturing_graph(stream):
    graph_obj = _capturing.get((stream.stream_id, stream.device_index))
    if graph_obj is None:
        raise RuntimeError(
            "graph_task_group_begin must be called while an NPU graph captures on this stream"
            + graph_error(ErrCode.PARAM)
        )
    return graph_obj._recording


class NpuGraphOpHandler:
    """Describes how captured operators of a kind take new host-side arguments on update() (torch_npu's
    hooks, all class methods; see _graph_dispatch for auto_dispatch_capture)."""

    @classmethod
    def get_update_specs(cls, op_name):
        """The arguments update() may change for `op_name` ("npu_x.default"), as (kind, position, name) triples:
        ("arg", schema index, name) or ("kwarg", name, name); compiled graphs build their update plans from them
        (torch_npu._inductor._aclgraph_update_plan)."""
        return []

    @classmethod
    def prepare_capture(cls, func, args, kwargs):
        """Before capture: the (func, args, kwargs) to capture instead (e.g. the .out overload)."""
        return func, args, kwargs

    @classmethod
    def record_wrap_kwarg(cls, key, value, tensor_param_names):
        return value

    @classmethod
    def update_args(cls, dispatch_record, update_input):
        """Apply one update: by default every named argument takes its new value."""
        dispatch_record.update(update_input)

    @classmethod
    def postprocess_result(cls, result, kwargs):
        return result


def register_npu_graph_handler(op_names: list[str]) -> object:
    """Class decorator registering an NpuGraphOpHandler for operator names ("aten::mm", "npu::...")."""
    names = [op_names] if isinstance(op_names, str) else list(op_names)

    def decorate(cls):
        if not (isinstance(cls, type) and issubclass(cls, NpuGraphOpHandler)):
            raise TypeError(
                "register_npu_graph_handler decorates NpuGraphOpHandler subclasses" + graph_error(ErrCode.TYPE)
            )
        for name in names:
            _graph_handlers[name] = cls
        return cls

    return decorate


def make_graphed_callables(
    callables: torch.nn.Module | Callable | tuple,
    sample_args: tuple,
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: tuple[int, int] | None = None,
) -> torch.nn.Module | Callable | tuple:
    """Graph-captured versions of callables (functions or Modules): forward and backward each replay
    one NPU graph. Same contract as torch.cuda.make_graphed_callables."""
    from torch_npu.npu._graphed_callables import make

    return make(callables, sample_args, num_warmup_iters, allow_unused_input, pool)


from torch_npu.npu import _builtin_graph_handlers  # noqa: E402,F401  (torch_npu's own operators' handlers)
