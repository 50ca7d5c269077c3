"""Building an ACL graph update plan entry for one operator call of a compiled graph: for each argument the
operator's graph handler can update, where its value comes from — an input of the graph (a value named as one
of the graph's inputs), a constant (a number, or a graph constant given by name), or a list of those."""

import torch

from torch_npu.npu._aclgraph_update_plan import update_specs
from torch_npu.utils._error_code import ErrCode, graph_error

__all__ = ["build_aclgraph_update_plan_entry_for_inductor", "build_aclgraph_update_plan_for_graph"]

# npu_fusion_attention_v3 takes new sequence lengths only in the TND layout (packed sequences), as its runtime
# graph handler updates them; other layouts keep the captured call.
_LAYOUT_GATED = {"npu_fusion_attention_v3": "TND", "npu_fusion_attention_grad_v3": "TND"}


def _value_name(value):
    if hasattr(value, "get_name"):
        return value.get_name()
    return getattr(value, "name", None) if not isinstance(value, (str, bytes)) else None


def _source(value, graph_input_names, constants, op_name, argument):
    if isinstance(value, (list, tuple)):
        return {"kind": "list", "items": [_source(v, graph_input_names, constants, op_name, argument) for v in value]}
    if isinstance(value, torch.Tensor):
        raise RuntimeError(
            f"aclgraph update plan: {op_name}'s {argument} is a Tensor constant of the graph, which a replay cannot "
            "update; pass it as an input of the compiled function" + graph_error(ErrCode.PARAM)
        )
    if isinstance(value, (bool, int, float)) or value is None:
        return {"kind": "constant", "value": value}
    name = _value_name(value)
    if name in graph_input_names:
        return {"kind": "input", "index": graph_input_names.index(name)}
    if name in constants:
        return _source(constants[name], graph_input_names, constants, op_name, argument)
    raise RuntimeError(
        f"aclgraph update plan: {op_name}'s {argument} ({value!r}) is neither a graph input nor a constant"
        + graph_error(ErrCode.PARAM)
    )


def _argument(args, kwargs, names, kind, position):
    if kind == "arg":
        if position < len(args):
            return True, args[position]
        name = names[position] if position < len(names) else None
        return name in kwargs, kwargs.get(name)
    if position in kwargs:
        return True, kwargs[position]
    if position in names and names.index(position) < len(args):
        return True, args[names.index(position)]
    return False, None


def build_aclgraph_update_plan_entry_for_inductor(target, args, kwargs, graph_input_names, constants):
    """The plan entry of one call of `target` (an overload: __name__ "npu_x.default" and _schema) with `args` /
    `kwargs` as the compiled graph passes them (graph values have names); `graph_input_names` are the graph's
    inputs in order, `constants` its named constants. None when the operator has nothing to update."""
    op_name = target.__name__
    specs = update_specs(op_name)
    if not specs:
        return None
    names = [a.name for a in target._schema.arguments]
    layout = _LAYOUT_GATED.get(op_name.split(".")[0])
    if layout is not None and "input_layout" in names:
        present, value = _argument(args, kwargs, names, "arg", names.index("input_layout"))
        if present and value != layout:
            return None
    updates = {}
    for kind, position, name in specs:
        present, value = _argument(args, kwargs, names, kind, position)
        if present:
            updates[name] = _source(value, list(graph_input_names), constants, op_name, name)
    return {"op": op_name, "updates": updates} if updates else None


def build_aclgraph_update_plan_for_graph(gm):
    """The update plan of an FX graph (one entry per call of an operator with update specs, in graph order) and
    the inputs it reads, or None when the graph has no such call, or when an input it reads also feeds anything
    else (a replay could then not reuse the captured graph for a new value of it)."""
    from torch_npu.npu._graph_dispatch import handler_for
    from torch_npu.npu._npugraph_handlers.npugraph_handler import _NPU_GRAPH_OP_HANDLERS

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = [n.name for n in placeholders]
    plan = []
    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        if handler_for(target, _NPU_GRAPH_OP_HANDLERS) is None:
            continue
        try:
            entry = build_aclgraph_update_plan_entry_for_inductor(target, node.args, node.kwargs, names, {})
        except RuntimeError:
            return None  # a length computed inside the graph: no plan, each value is its own graph
        if entry is None:
            return None  # NPUGraph.update takes every handled operator's arguments or none
        plan.append(entry)
    inputs = sorted({index for entry in plan for index in _input_indices(entry["updates"].values())})
    if not plan or any(not _only_feeds_updates(placeholders[i]) for i in inputs):
        return None
    return plan, inputs


def _input_indices(sources):
    for source in sources:
        if source["kind"] == "input":
            yield source["index"]
        elif source["kind"] == "list":
            yield from _input_indices(source["items"])


def _only_feeds_updates(placeholder):
    return all(user.op == "call_function" and update_specs(getattr(user.target, "__name__", "")) for user in placeholder.users)  # fmt: skip
