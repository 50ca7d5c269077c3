"""Dynamo backends torch_npu documents beside inductor (registered as torch_dynamo_backends entry
points, so `torch.compile(backend="npugraphs")` finds them without importing anything early).

* "npugraphs": AOT autograd, then the forward and backward FX graphs captured into NPU graphs and
  replayed (no code generation) — PyTorch's "cudagraphs" backend for npu. Graphs compiled without
  autograd are captured as Dynamo traced them when nothing needs AOT autograd's functionalization.
* "npugraph_ex": torch_npu's NPU graph backend with FX passes and a compile cache:
  `torch_npu.npu.npugraph_ex.compile_fx`.
"""

import functools

import torch


def _device_index(gm):
    from torch._dynamo.backends.cudagraphs import get_device_node_mapping

    devices = [d for d in get_device_node_mapping(gm) if d.type == "npu"]
    return devices[0].index if devices else torch.npu.current_device()


def _skip_reason(gm, fixed):
    from torch._dynamo.backends.cudagraphs import find_input_mutations, get_device_node_mapping

    devices = {d for d in get_device_node_mapping(gm) if d.type != "meta"}
    if any(d.type != "npu" for d in devices):
        return f"devices {sorted(str(d) for d in devices)} (an NPU graph holds npu work only)"
    mutated = find_input_mutations(gm.graph) - set(range(fixed))
    if mutated:
        return f"mutated inputs ({len(mutated)} instances)"
    return None


def _graph_compiler(gm, example_inputs, *, fixed, kind):
    from torch._dynamo.backends.debugging import boxed_nop
    from torch._inductor.compile_fx import get_static_input_idxs

    from torch_npu._inductor.graph_runner import NpuGraphRunner, report_skip

    run = boxed_nop(gm, example_inputs)
    reason = _skip_reason(gm, fixed)
    if reason is not None:
        report_skip(reason)
        return run
    # parameters and buffers (inlined nn.Modules lift them to inputs) stay where they are
    static = get_static_input_idxs(fixed) if kind != "backward" else range(fixed)
    from torch_npu._inductor._aclgraph_update_plan.codegen import build_aclgraph_update_plan_for_graph

    plan = build_aclgraph_update_plan_for_graph(gm)
    return NpuGraphRunner(run, static, device_index=_device_index(gm), name=f"npugraphs {kind} graph", update_plan=plan)


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

    if not torch.is_grad_enabled() and _captures_as_traced(gm):  # Dynamo guards on the grad mode
        return _traced_graph_runner(gm, example_inputs)
    from torch._inductor.utils import count_tangents, num_fw_fixed_arguments

    def forward(aot_gm, aot_inputs, is_inference=False):
        fixed = num_fw_fixed_arguments(len(example_inputs), len(aot_inputs))
        return _graph_compiler(aot_gm, aot_inputs, fixed=fixed, kind="inference" if is_inference else "forward")

    def backward(aot_gm, aot_inputs):
        return _graph_compiler(aot_gm, aot_inputs, fixed=count_tangents(aot_gm), kind="backward")

    compiler = aot_autograd(
        fw_compiler=forward,
        bw_compiler=backward,
        inference_compiler=functools.partial(forward, is_inference=True),
        keep_inference_input_mutations=False,
    )
    return compiler(gm, example_inputs)


def npugraph_ex(gm, example_inputs, options=None, **kwargs):
    """torch.compile(model, backend="npugraph_ex", options={...})."""
    from torch_npu.npu.npugraph_ex import compile_fx

    return compile_fx(gm, example_inputs, options=options)
