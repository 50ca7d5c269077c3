"""pipeline(): split a model into pipeline stages, traced by torch.export (PyTorch's way) or by torch.fx.

``mode=None`` / ``"export"`` is PyTorch's ``torch.distributed.pipelining.pipeline``. ``mode="fx"`` is torch_npu's
addition for models torch.export cannot capture (data-dependent control flow, operators without meta kernels):
the model is traced symbolically, with PyTorch's own layers and the modules named in ``atomic_units`` kept as
calls (their insides are never traced), and run once on the example inputs to record each value's shape and
dtype, which the stages need to size their messages. The split points go into the graph as PyTorch's
``pipe_split`` markers and the graph is split by ``torch.fx.passes.split_module``; each stage module owns the
layers and parameters it uses (a parameter used by several stages is shared by them, like export mode's
REPLICATE). The result is PyTorch's ``Pipe``: ``pipe.build_stage(index, device, group)`` and the schedules work
as in export mode. Stage modules name their layers as the split module does (``layers_0`` for ``layers.0``).
"""

import inspect
from operator import attrgetter
from typing import Any

import torch
import torch.fx as fx
from torch.distributed.pipelining import _IR
from torch.fx.passes.split_module import split_module
from torch.utils._pytree import tree_leaves, tree_map_only

__all__ = ["pipeline"]

_SPLIT = _IR.aten_pipe_split_alias


def pipeline(
    module: "torch.nn.Module",
    mb_args: "tuple[Any, ...]",
    mb_kwargs: "dict[str, Any] | None" = None,
    split_spec=None,
    split_policy=None,
    mode: "str | None" = None,
    atomic_units: "list[str] | None" = None,
):
    """Split ``module`` into pipeline stages (a ``Pipe``), traced by torch.export (``mode=None`` or ``"export"``)
    or by torch.fx (``mode="fx"``, where ``atomic_units`` names modules kept whole)."""
    if split_spec is not None and split_policy is not None:
        raise ValueError("Cannot specify both `split_spec` and `split_policy`. Please use only one of them.")
    if mode in (None, "export"):
        if atomic_units is not None:
            raise ValueError("`atomic_units` is only supported when `mode='fx'`.")
        return _IR.pipeline(module, mb_args, mb_kwargs, split_spec=split_spec, split_policy=split_policy)
    if mode != "fx":
        raise ValueError(f"`mode` must be one of None, 'export', or 'fx', got {mode!r}.")
    traced = _trace(module, tuple(mb_args), mb_kwargs or {}, atomic_units or [])
    if split_spec is not None:
        _insert_split_points(traced, split_spec)
    elif split_policy is not None:
        traced = split_policy(traced)
    return _pipe_of(_split(traced, module))


class _Tracer(fx.Tracer):
    """Traces through the model's own modules; PyTorch's layers and the atomic units stay module calls."""

    def __init__(self, atomic_units):
        super().__init__()
        self._atomic_units = set(atomic_units)

    def is_leaf_module(self, m, qualified_name):
        if qualified_name in self._atomic_units:
            return True
        if isinstance(m, torch.nn.Sequential):
            return False
        return m.__module__.startswith(("torch.nn.", "torch.ao.nn.")) or super().is_leaf_module(m, qualified_name)


class _ShapeRecorder(fx.Interpreter):
    """Runs the graph once, leaving each node's value as a meta tensor in node.meta["val"] (what stages read)."""

    def run_node(self, n):
        result = super().run_node(n)
        n.meta["val"] = tree_map_only(
            torch.Tensor,
            lambda t: torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta"),
            result,
        )
        return result


def _trace(module, args, kwargs, atomic_units):
    names = dict(module.named_modules())
    missing = [name for name in atomic_units if name not in names]
    if missing:
        raise ValueError("atomic_units contains module names that do not exist in the model: " + ", ".join(missing))
    try:
        bound = inspect.signature(module.forward).bind(*args, **kwargs)
    except TypeError as err:
        raise ValueError(f"Failed to bind example inputs to forward signature: {err}") from err
    bound.apply_defaults()
    # arguments without tensors (flags, sizes) are traced as the constants they are
    concrete = {
        name: value
        for name, value in bound.arguments.items()
        if not any(isinstance(leaf, torch.Tensor) for leaf in tree_leaves(value))
    }
    graph = _Tracer(atomic_units).trace(module, concrete_args=concrete)
    traced = fx.GraphModule(module, graph)
    with torch.no_grad():
        _ShapeRecorder(traced).run(*[v for name, v in bound.arguments.items() if name not in concrete])
    return traced


def _insert_split_points(traced, split_spec):
    graph = traced.graph
    for target, point in split_spec.items():
        calls = [
            n
            for n in graph.nodes
            if n.op == "call_module" and (n.target == target or n.target.startswith(f"{target}."))
        ]
        if not calls:
            raise ValueError(f"split_spec target '{target}' did not match any module call of the traced model")
        if point == _IR.SplitPoint.BEGINNING:
            with graph.inserting_before(calls[0]):
                graph.call_function(_SPLIT, ())
        elif point == _IR.SplitPoint.END:
            with graph.inserting_after(calls[-1]):
                graph.call_function(_SPLIT, ())
        else:
            raise ValueError(f"Unsupported split point for target '{target}': {point}")
    graph.lint()
    traced.recompile()


def _split(traced, module):
    """Stage submodules submod_pp_<i> of the graph cut at its pipe_split markers, each owning its parameters."""
    stage = [0]

    def stage_of(n):
        if (n.op, n.target) == ("call_function", _SPLIT):
            stage[0] += 1
        return stage[0]

    split = split_module(traced, module, stage_of, partition_affix="pp")
    for submodule in split.children():
        for n in [n for n in submodule.graph.nodes if (n.op, n.target) == ("call_function", _SPLIT)]:
            submodule.graph.erase_node(n)
        submodule.recompile()
    for attr in [n for n in split.graph.nodes if n.op == "get_attr"]:
        _move_into_stages(split, attr)
    split.delete_all_unused_submodules()
    split.graph.lint()
    split.recompile()
    return split


def _move_into_stages(split, attr):
    """A parameter or buffer the root graph reads and passes to stages becomes an attribute of each such stage."""
    value = attrgetter(attr.target)(split)
    name = attr.target.replace(".", "_")
    for call in list(attr.users):
        stage = split.get_submodule(call.target)
        position = call.args.index(attr)
        placeholder = [n for n in stage.graph.nodes if n.op == "placeholder"][position]
        if isinstance(value, torch.nn.Parameter):
            stage.register_parameter(name, value)
        else:
            stage.register_buffer(name, value)
        with stage.graph.inserting_before(placeholder):
            read = stage.graph.get_attr(name)
        read.meta = dict(placeholder.meta)
        placeholder.replace_all_uses_with(read)
        stage.graph.erase_node(placeholder)
        stage.recompile()
        call.args = call.args[:position] + call.args[position + 1 :]
    split.graph.erase_node(attr)


def _pipe_of(split):
    return _IR.Pipe(split, _IR.Pipe._number_and_count_forward_stages(split), False, None)
