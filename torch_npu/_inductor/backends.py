"""Dynamo backends torch_npu documents beside inductor (registered as torch_dynamo_backends entry
points, so `torch.compile(backend="npugraphs")` finds them without importing anything early).

* "npugraphs": AOT autograd, then the forward and backward FX graphs captured into NPU graphs and
  replayed (no code generation) — PyTorch's "cudagraphs" backend for npu. Which graphs are captured is
  decided by torch_npu.utils._graph_tree.check_for_skip, read from that module at each compile so that a
  program's replacement applies; a skipped forward's backward runs without a graph too. Graphs compiled
  without autograd are captured as Dynamo traced them when nothing needs AOT autograd's functionalization.
* "npugraph_ex": torch_npu's NPU graph backend with FX passes and a compile cache:
  `torch_npu.npu.npugraph_ex.compile_fx`.
"""

import functools

import torch


def _graph_compiler(gm, example_inputs, *, fixed, kind, graphed):
    """The NPU graph runner of one AOT graph, or the graph as it is when torch_npu.utils._graph_tree's
    check_for_skip (looked up now: programs replace it) gives a reason. `graphed` (shared by a forward and its
    backward) is cleared by a skipped forward: its backward then runs without a graph too."""
    from torch._dynamo.backends.debugging import boxed_nop
    from torch._inductor.compile_fx import get_static_input_idxs

    from torch_npu._inductor._aclgraph_update_plan.codegen import build_aclgraph_update_plan_for_graph
    from torch_npu._inductor.graph_runner import NpuGraphRunner, report_skip
    from torch_npu.utils import _graph_tree

    run = boxed_nop(gm, example_inputs)
    if kind == "backward" and not graphed:
        return run
    reason = _graph_tree.check_for_skip(gm, fixed)
    if reason:
        report_skip(reason)
        if kind != "backward":
            graphed.disable(graphed)
        return run
    # parameters and buffers (inlined nn.Modules lift them to inputs) stay where they are
    static = get_static_input_idxs(fixed) if kind != "backward" else range(fixed)
    plan = build_aclgraph_update_plan_for_graph(gm)
    index = _graph_tree.get_device_index(gm)
    return NpuGraphRunner(run, static, device_index=index, name=f"npugraphs {kind} graph", update_plan=plan)


def _example_value(node):
    return node.meta.get("val", node.meta.get("example_value"))


def _captures_as_traced(gm):
    """Whether Dynamo's own graph can be captured as it is: only for graphs traced without autograd, that
    change no input, return no view of an input and do not switch grad mode inside (AOT autograd's
    functionalization and output-alias handling are what those need)."""
    import operator

    from torch.multiprocessing.reductions import StorageWeakRef

    writes = {operator.setitem, torch._C._set_grad_enabled}
    writes.update(getattr(operator, f"i{op}") for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"))
    writes.update(getattr(operator, f"i{op}") for op in ("and", "or", "xor", "lshift", "rshift", "matmul"))
    inputs = set()
    for node in gm.graph.nodes:
        value = _example_value(node)
        if node.op == "placeholder":
            if isinstance(value, torch.Tensor):
                inputs.add(StorageWeakRef(value.untyped_storage()))
        elif node.op == "output":
            for out in node.args[0] if isinstance(node.args[0], (list, tuple)) else (node.args[0],):
                value = _example_value(out) if isinstance(out, torch.fx.Node) else None
                if isinstance(value, torch.Tensor) and StorageWeakRef(value.untyped_storage()) in inputs:
                    return False
        else:
            name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
            in_place = name.endswith("_") and not name.endswith("__")
            if (
                in_place
                or node.target in writes
                or node.kwargs.get("out") is not None
                or node.kwargs.get("inplace") is True
            ):
                return False
    return True


def _traced_graph_runner(gm, example_inputs):
    """Inference without autograd: Dynamo's graph captured directly (AOT autograd's runtime wrappers
    would only add host time to every replay)."""
    from torch_npu._inductor.graph_runner import NpuGraphRunner, report_skip

    devices = {v.device for v in map(_example_value, gm.graph.nodes) if isinstance(v, torch.Tensor)}
    if any(d.type != "npu" for d in devices):
        report_skip(f"devices {sorted(str(d) for d in devices)} (an NPU graph holds npu work only)")
        return gm.forward
    static = [
        i
        for i, node in enumerate(gm.graph.find_nodes(op="placeholder"))
        if (node.meta.get("tensor_dict") or {}).get("_dynamo_static_input_type")
    ]
    index = next((d.index for d in devices if d.index is not None), torch.npu.current_device())
    runner = NpuGraphRunner(lambda args: gm(*args), static, device_index=index, name="npugraphs dynamo graph")

    def run(*args):
        return runner.call(args)

    return run


def npugraphs(gm, example_inputs, **kwargs):
    """torch.compile(model, backend="npugraphs")."""
    from torch._dynamo.backends.common import aot_autograd

    from torch_npu.utils import _graph_tree

    # Dynamo guards on the grad mode; a program's own check_for_skip is given AOT autograd's graphs
    own_check = _graph_tree.check_for_skip is _graph_tree.DEFINED_CHECK_FOR_SKIP
    if own_check and not torch.is_grad_enabled() and _captures_as_traced(gm):
        return _traced_graph_runner(gm, example_inputs)
    from torch._inductor.utils import BoxedBool, count_tangents, num_fw_fixed_arguments

    graphed = BoxedBool(True)

    def forward(aot_gm, aot_inputs, is_inference=False):
        fixed = num_fw_fixed_arguments(len(example_inputs), len(aot_inputs))
        kind = "inference" if is_inference else "forward"
        return _graph_compiler(aot_gm, aot_inputs, fixed=fixed, kind=kind, graphed=graphed)

    def backward(aot_gm, aot_inputs):
        return _graph_compiler(aot_gm, aot_inputs, fixed=count_tangents(aot_gm), kind="backward", graphed=graphed)

    compiler = aot_autograd(
        fw_compiler=forward,
        bw_compiler=backward,
        inference_compiler=functools.partial(forward, is_inference=True),
        keep_inference_input_mutations=torch._dynamo.config.cudagraph_backend_keep_input_mutation,
    )
    return compiler(gm, example_inputs)


def npugraph_ex(gm, example_inputs, options=None, **kwargs):
    """torch.compile(model, backend="npugraph_ex", options={...})."""
    from torch_npu.npu.npugraph_ex import compile_fx

    return compile_fx(gm, example_inputs, options=options)
