"""Dynamo traces the npu runtime's streams, events and autocast as it traces CUDA's.

Dynamo knows CUDA's (and XPU's) runtime calls by name: it builds `torch.cuda.Stream()` / `torch.cuda.Event()`
inside a graph, answers `torch.cuda.current_stream()` from its own record of the current stream, enters
`torch.npu.stream(s)` as a stream context and `torch.cuda.amp.autocast()` as an autocast region. The npu
runtime's functions are Python functions that initialise the device first, so without these entries Dynamo
inlines them, meets the C++ device query and breaks the graph (`fullgraph=True` fails). torch_npu makes the
same entries (its `torch_npu.utils._dynamo` and `dynamo.trace_rule`).
"""

import functools
import inspect

import torch

# Called inside a graph as they are (TorchInGraphFunctionVariable), as torch_npu lists them.
_IN_GRAPH_FUNCTIONS = ("current_stream", "default_stream", "stream", "set_stream")


def trace_streams_and_events():
    """Stream and Event classes built in the graph; the stream functions called in it; `current_stream()`
    answered as CUDA's is. True once added."""
    from torch._dynamo import trace_rules
    from torch._dynamo.variables.torch import TorchInGraphFunctionVariable
    from torch._dynamo.variables.user_defined import UserDefinedClassVariable

    in_graph_classes = UserDefinedClassVariable._in_graph_classes

    @functools.cache
    def with_npu_classes():
        return in_graph_classes() | {torch.npu.Stream, torch.npu.Event}

    UserDefinedClassVariable._in_graph_classes = staticmethod(with_npu_classes)

    names = [f"torch_npu.npu.streams.{name}" for name in _IN_GRAPH_FUNCTIONS]
    trace_rules.torch_name_rule_map.append(dict.fromkeys(names, TorchInGraphFunctionVariable))
    trace_rules.clear_lru_cache()

    handlers = TorchInGraphFunctionVariable._get_handlers

    @functools.cache
    def with_npu_current_stream():
        table = dict(handlers())
        table[torch.npu.current_stream] = table[torch.cuda.current_stream]
        return table

    TorchInGraphFunctionVariable._get_handlers = staticmethod(with_npu_current_stream)
    return True


def trace_autocast():
    """`torch.npu.amp.autocast(...)` entered as the autocast region `torch.autocast("npu", ...)` is. True once
    added."""
    from torch._dynamo.variables import torch as dynamo_torch
    from torch._dynamo.variables.ctx_manager import AutocastModeVariable

    from torch_npu.npu.amp.autocast_mode import autocast

    signature = inspect.signature(autocast)
    dynamo_torch.supported_ctx_manager_classes[autocast] = None
    call_function = dynamo_torch.TorchCtxManagerClassVariable.call_function

    def call_npu_autocast(self, tx, args, kwargs):
        if self.value is not autocast:
            return call_function(self, tx, args, kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = [bound.arguments[key] for key in ("dtype", "enabled", "cache_enabled")]
        constants = [v.as_python_constant() if hasattr(v, "as_python_constant") else v for v in values]
        return AutocastModeVariable(["npu", *constants], initial_values=None)

    dynamo_torch.TorchCtxManagerClassVariable.call_function = call_npu_autocast
    return True
