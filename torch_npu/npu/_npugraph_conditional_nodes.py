"""Data-dependent control flow inside NPU graphs: `torch.cond(pred, true_fn, false_fn, operands)` captured under
`NPUGraphCaptureControlFlowOpDispatchMode` becomes a conditional node whose branch each replay picks from the
value `pred` holds then (torch_npu's counterpart of torch's CUDAGraphCaptureControlFlowOpDispatchMode).

Each branch is captured into a graph of its own (the enclosing graph's memory pool, a stream of its own, so the
enclosing capture does not record it); the false branch copies its outputs into the true branch's, so the rest of
the enclosing graph reads one set of tensors. The enclosing graph records a host function that replays the
branch `pred` selects. Capturing runs both branches (as vnpu runs every captured operator): after the capture the
outputs hold the false branch's values, and every replay computes the selected one. Random operators inside a
branch are refused, as torch refuses them in conditional nodes."""

import contextlib

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from torch_npu.npu._host_func import run_when_replayed

__all__ = ["ControlFlowOpWarmupDispatchMode", "NPUGraphCaptureControlFlowOpDispatchMode", "if_else_node"]

RNG_IN_BRANCH = "RNG within data-dependent conditional nodes is not supported yet"


class NPUGraphCaptureControlFlowOpDispatchMode(TorchDispatchMode):
    """Captures each `torch.cond` met while a graph captures the current stream as a conditional node (nested
    conditions too); outside a capture `torch.cond` runs as usual."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __init__(self) -> None:
        self.supports_higher_order_operators = True
        super().__init__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = {} if kwargs is None else kwargs
        if func is torch.ops.higher_order.cond and torch.npu.is_current_stream_capturing():
            with self:  # entered again: conditions inside a branch become nodes of the branch's graph
                return if_else_node(*args, **kwargs)
        return func(*args, **kwargs)


class ControlFlowOpWarmupDispatchMode(contextlib.nullcontext):
    """The warm-up of a function an NPU graph tree will record (torch's ControlFlowOpWarmupDispatchMode for
    npu). On CUDA, both branches of each `torch.cond` run under a capture that is thrown away, so that every
    kernel of either branch is loaded before the recording; vnpu's kernels need no loading, so the warm-up runs
    `torch.cond` as it is."""


class _RefuseRandomOperators(TorchDispatchMode):
    def __init__(self) -> None:
        self.supports_higher_order_operators = True  # conditions nested in a branch pass on to the capture mode
        super().__init__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
            raise RuntimeError(RNG_IN_BRANCH)
        return func(*args, **(kwargs or {}))


def _capturing_graph():
    from torch_npu.npu.graphs import _capturing

    stream = torch.npu.current_stream()
    return _capturing[(stream.stream_id, stream.device_index)]


def _capture_branch(pool, fn, operands, into=None):
    """Captures `fn(*operands)` (then copies its outputs into `into`'s) into a graph of its own: (graph, outputs)."""
    branch = torch.npu.NPUGraph()
    with torch.npu.stream(torch.npu.Stream()):
        branch.capture_begin(pool=pool)
        try:
            with _RefuseRandomOperators():
                outputs = fn(*operands)
                if into is not None:
                    for kept, produced in zip(pytree.tree_iter(into), pytree.tree_iter(outputs), strict=True):
                        kept.copy_(produced)
        finally:
            branch.capture_end()
    return branch, outputs if into is None else into


def if_else_node(pred, true_fn, false_fn, operands):
    """The conditional node of `torch.cond(pred, true_fn, false_fn, operands)` in the graph capturing the current
    stream: returns the outputs every replay writes."""
    if not isinstance(pred, torch.Tensor) or pred.device.type != "npu":
        raise ValueError("Conditions must be on an npu device to use conditional node in npu graphs")
    pool = _capturing_graph()._pool  # the pool the enclosing capture allocates from (pool() is for ended captures)
    if_branch, outputs = _capture_branch(pool, true_fn, operands)
    else_branch, _ = _capture_branch(pool, false_fn, operands, into=outputs)

    def replay_selected_branch():
        (if_branch if bool(pred) else else_branch).replay()

    run_when_replayed("conditional_node", replay_selected_branch)
    return outputs
