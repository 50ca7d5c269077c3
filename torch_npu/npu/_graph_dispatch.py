"""torch.npu.graph(..., auto_dispatch_capture=True): operators with a registered graph handler are captured
as one updatable task group each, so NPUGraph.update(cpu_update_input=[...]) can give them new host-side
arguments (sequence lengths of attention in decode steps) before a replay.

vnpu's npu operators run as compositions of ATen operators, so one such operator is several captured tasks;
the group remembers the call, and an update issues it again with the new arguments in place of its tasks
(what graph_task_group_begin / graph_task_update_begin do by hand; the new tasks may be more or fewer), results
it allocates anew being copied into the tensors the caller received at capture. Handlers follow torch_npu's
NpuGraphOpHandler: prepare_capture(func, args, kwargs) -> (func, args, kwargs) may switch to the .out
overload, update_args(record, update_input) changes the record's arguments (record.args holds every schema
argument in order; record.update({name: value}) sets them by name), postprocess_result shapes the result."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torch_npu.utils._error_code import ErrCode, graph_error

__all__ = []


class DispatchRecord:
    """One captured operator call: its overload, every schema argument in order, and its task range."""

    def __init__(self, func, args, kwargs, handler, start, end, stream):
        self.func = func
        self.handler = handler
        self.start, self.end = start, end
        self.stream = stream
        schema = func._schema.arguments
        self._names = [a.name for a in schema]
        self._kwarg_only = [a.kwarg_only for a in schema]
        self.args = [
            args[i] if i < len(args) else kwargs.get(a.name, a.default_value if a.has_default_value() else None)
            for i, a in enumerate(schema)
        ]
        self.kwargs = {}

    @property
    def op_cache_entry(self):
        """The captured overload (torch_npu's name for it on a dispatch record)."""
        return self.func

    def update(self, values):
        for name, value in values.items():
            if name not in self._names:
                raise RuntimeError(
                    f"NPUGraph.update: {self.func._schema.name} has no argument named '{name}'"
                    + graph_error(ErrCode.PARAM)
                )
            self.args[self._names.index(name)] = value
        return self

    def call(self):
        positional = [v for v, kw in zip(self.args, self._kwarg_only) if not kw]
        keywords = {n: v for n, v, kw in zip(self._names, self.args, self._kwarg_only) if kw}
        return self.func(*positional, **keywords)


def handler_for(func, handlers):
    """The handler registered for an overload under any of torch_npu's names for it."""
    qualified = func._schema.name  # "npu::name"
    short = qualified.split("::", 1)[1]
    overload = func._overloadname
    for name in (f"{qualified}.{overload}", qualified, f"{short}.{overload}", short):
        if name in handlers:
            return handlers[name]
    return None


class AutoDispatchCapture(TorchDispatchMode):
    """Active while a graph captures with auto_dispatch_capture: groups each handled operator's tasks."""

    def __init__(self, graph, handlers):
        super().__init__()
        self.graph = graph
        self.handlers = handlers

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handler = handler_for(func, self.handlers)
        if handler is None:
            return func(*args, **kwargs)
        func, args, kwargs = handler.prepare_capture(func, args, kwargs)
        recording = self.graph._recording
        start = recording.size()
        result = func(*args, **kwargs)
        record = DispatchRecord(func, args, kwargs, handler, start, recording.size(), torch.npu.current_stream())
        record.outputs = _tensors(result)
        self.graph._dispatch_records.append(record)
        return handler.postprocess_result(result, kwargs)


def _tensors(result):
    items = result if isinstance(result, (tuple, list)) else (result,)
    return [t for t in items if isinstance(t, torch.Tensor)]


def reissue(graph, record):
    """Issue a record's call again, on the stream it was captured on, in place of its captured tasks."""
    from torch_npu import _C

    stream = record.stream
    replacement = _C._GraphRecording()
    replacement.begin(stream.stream_id, stream.device_index)
    try:
        with torch.npu.stream(stream):
            # results the call allocates anew are copied into the tensors the caller got at capture
            for held, new in zip(record.outputs, _tensors(record.call())):
                if new is not held:
                    held.copy_(new)
    finally:
        replacement.end()
    graph._recording.replace(record.start, record.end, replacement)
    shift = replacement.size() - (record.end - record.start)
    record.end += shift
    for later in graph._dispatch_records:
        if later.start > record.start:
            later.start += shift
            later.end += shift


def default_prepare_capture(func, args, kwargs):
    """Switch a functional call of an operator with an .out overload to it, with its results preallocated, so
    that an update writes the same tensors the caller holds."""
    packet = func.overloadpacket
    if func._overloadname == "out" or "out" not in packet.overloads():
        return func, args, kwargs
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = func(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
    outs = fake if isinstance(fake, (tuple, list)) else (fake,)
    device = next(a.device for a in args if isinstance(a, torch.Tensor))
    out = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device) for t in outs]
    from torch_npu.ops.registration import written_arguments

    return packet.out, args, {**kwargs, **dict(zip(written_arguments(packet.out._schema), out))}
