"""Collectives inside host-compiled npu graphs.

Inductor's code for an npu graph runs on CPU aliases of npu memory (host_compile), and c10d picks a
group's backend by the device of the tensors it is given: a collective of the compiled code would reach
an hccl group with CPU tensors and fail ("No backend type associated with device type cpu"). Before
lowering, each functional collective of the graph (`_c10d_functional.all_reduce`, ...) is given its
twin in `torch.ops._npu_host_collectives`: the same schema, whose kernel hands the collective npu tensors
over the same memory, waits for it and returns CPU aliases of the results. The group computes exactly
what the same collective computes in eager mode. The `wait_tensor` calls on those results are dropped
(the twin has waited), so the collective does not overlap the graph's computation: vnpu computes both on
the same host cores.
"""

import functools
import operator

import torch

from torch_npu import _C

NAMESPACE = "_npu_host_collectives"
COLLECTIVES = (
    "all_reduce",
    "all_reduce_coalesced",
    "all_gather_into_tensor",
    "all_gather_into_tensor_coalesced",
    "reduce_scatter_tensor",
    "reduce_scatter_tensor_coalesced",
    "all_to_all_single",
    "broadcast",
)


def _on_npu(args, device):
    """npu tensors over the memory of the CPU tensors among args (nested lists and tuples included)."""
    from torch.utils._pytree import tree_map_only

    return tree_map_only(
        torch.Tensor, lambda t: _C._npu_alias_of_host(t, device) if t.device.type == "cpu" else t, args
    )


def _run_on_npu(collective, *args, **kwargs):
    """The twin's kernel: inside host-compiled code, the collective on npu tensors over the arguments' memory;
    anywhere else, the collective itself (a CPU tensor then goes to the group's CPU backend, as it would)."""
    if not _C._in_host_compiled_region():
        return collective(*args, **kwargs)
    device = torch.npu.current_device()
    result = collective(*_on_npu(args, device), **kwargs)
    results = result if isinstance(result, (list, tuple)) else [result]
    for tensor in results:
        torch.ops._c10d_functional.wait_tensor(tensor)
    aliases = [_C._cpu_alias(tensor) for tensor in results]
    return aliases if isinstance(result, (list, tuple)) else aliases[0]


def _shapes_of(collective, *args, **kwargs):
    return collective(*args, **kwargs)  # the collective's own fake kernel


@functools.cache
def _library():
    library = torch.library.Library(NAMESPACE, "DEF")  # noqa: TOR901  (definitions live for the process)
    for name in COLLECTIVES:
        collective = getattr(torch.ops._c10d_functional, name).default
        library.define(str(collective._schema).split("::", 1)[1])
        for key in ("CPU", "PrivateUse1"):  # (npu tensors go to the collective, not through the redirect)
            library.impl(name, functools.partial(_run_on_npu, collective), key)
        torch.library.register_fake(f"{NAMESPACE}::{name}", functools.partial(_shapes_of, collective), lib=library)
    return library


def host_twin(target):
    """The twin of a functional collective (an OpOverload of _c10d_functional), or None for any other target."""
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "_c10d_functional":
        return None
    name = target._opname
    if name not in COLLECTIVES:
        return None
    _library()
    return getattr(getattr(torch.ops, NAMESPACE), name).default


def _is_twin_result(node):
    if node.op == "call_function" and node.target is operator.getitem:
        node = node.args[0]
    return (
        isinstance(node, torch.fx.Node)
        and isinstance(node.target, torch._ops.OpOverload)
        and node.target.namespace == NAMESPACE
    )


def route_collectives_through_npu(gm):
    """Gives each functional collective of gm its twin and drops the waits on the twins' results (in place);
    returns whether gm changed."""
    changed = False
    for node in gm.graph.nodes:
        twin = host_twin(node.target) if node.op == "call_function" else None
        if twin is not None:
            node.target = twin
            changed = True
    wait = torch.ops._c10d_functional.wait_tensor.default
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is wait and _is_twin_result(node.args[0]):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    if changed:
        gm.recompile()
    return changed
