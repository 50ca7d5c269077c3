"""Checking an ACL graph update plan against a graph's captured operators, and resolving it for new inputs
(the plan's layout: torch_npu.npu._aclgraph_update_plan)."""

from torch_npu.utils._error_code import ErrCode, graph_error

__all__ = [
    "ACLGRAPH_UPDATE_PLAN_GLOBAL",
    "build_cpu_update_input_for_graph",
    "resolve_aclgraph_update_plan",
    "update_specs",
    "validate_aclgraph_update_plan",
]

ACLGRAPH_UPDATE_PLAN_GLOBAL = "_torch_npu_aclgraph_update_plan"
_KINDS = ("input", "constant", "list")


def _error(message):
    return RuntimeError(f"aclgraph update plan: {message}" + graph_error(ErrCode.PARAM))


def update_specs(op_name):
    """The (kind, position, name) update specs the registered graph handler gives `op_name` ("x.default"): its
    get_update_specs, or a legacy UPDATE_SPECS table; [] for an operator without a handler."""
    from torch_npu.npu._npugraph_handlers.npugraph_handler import _NPU_GRAPH_OP_HANDLERS

    handler = _NPU_GRAPH_OP_HANDLERS.get(op_name) or _NPU_GRAPH_OP_HANDLERS.get(op_name.split(".")[0])
    if handler is None:
        return []
    if hasattr(handler, "get_update_specs"):
        return list(handler.get_update_specs(op_name))
    return list(getattr(handler, "UPDATE_SPECS", {}).get(op_name, []))


def _packet_name(op_name):
    """An overload's operator name: npu_x.default and npu_x.out are one operator for a plan."""
    return op_name.split(".")[0]


def _check_source(source, op):
    if not isinstance(source, dict) or source.get("kind") not in _KINDS:
        raise _error(f"invalid source {source!r} for {op}: a dict of kind input, constant or list")
    if source["kind"] == "input" and not isinstance(source.get("index"), int):
        raise _error(f"invalid source {source!r} for {op}: an input source needs an int index")
    if source["kind"] == "constant" and not isinstance(source.get("value"), (bool, int, float, type(None))):
        raise _error(f"unsupported constant {source.get('value')!r} for {op}: ints, floats, bools or None")
    if source["kind"] == "list":
        if not isinstance(source.get("items"), (list, tuple)):
            raise _error(f"invalid source {source!r} for {op}: a list source needs items")
        for item in source["items"]:
            _check_source(item, op)


def validate_aclgraph_update_plan(plan, records):
    """Checks a plan against the graph's captured operator records (each with op_cache_entry, the overload, and
    kwargs, its recorded arguments): one entry per record, the same operator, known arguments, sound sources."""
    if not plan and records:
        raise _error(
            f"missing for {len(records)} captured operators with updatable arguments; the graph may come from "
            "cached compiled code built without one (clear the inductor cache and compile again)"
        )
    if len(plan) != len(records):
        raise _error(f"length mismatch: {len(plan)} entries for {len(records)} captured operators")
    for entry, record in zip(plan, records, strict=True):
        if not isinstance(entry, dict) or not isinstance(entry.get("op"), str) or not isinstance(entry.get("updates"), dict):  # fmt: skip
            raise _error(f"invalid plan entry {entry!r}: a dict with op and updates")
        captured = record.op_cache_entry.__name__
        if _packet_name(entry["op"]) != _packet_name(captured):
            raise _error(f"op mismatch: the plan has {entry['op']}, the graph captured {captured}")
        if not entry["updates"]:
            raise _error(f"the entry of {entry['op']} has no updates")
        known = set(getattr(record, "kwargs", {})) | {spec[2] for spec in update_specs(captured)}
        for name, source in entry["updates"].items():
            _check_source(source, entry["op"])
            if name not in known:
                raise _error(f"{name} is not an updatable argument of {captured}")


def _resolve(source, new_inputs):
    kind = source["kind"]
    if kind == "constant":
        return source["value"]
    if kind == "list":
        return [_resolve(item, new_inputs) for item in source["items"]]
    index = source["index"]
    if not 0 <= index < len(new_inputs):
        raise _error(f"input index {index} is out of range for {len(new_inputs)} inputs")
    return new_inputs[index]


def resolve_aclgraph_update_plan(plan, new_inputs):
    """NPUGraph.update's cpu_update_input for `new_inputs`: one {argument: value} dict per plan entry."""
    return [{name: _resolve(source, new_inputs) for name, source in entry["updates"].items()} for entry in plan]


def build_cpu_update_input_for_graph(plan, new_inputs, records):
    """validate_aclgraph_update_plan, then resolve_aclgraph_update_plan."""
    validate_aclgraph_update_plan(plan, records)
    return resolve_aclgraph_update_plan(plan, new_inputs)
