"""mode="reduce-overhead" for npu graphs: inductor's compiled code handed to the NPU graph trees.

For a CUDA graph, inductor checks that the compiled graph can be recorded and wraps it in CUDA graph
trees (torch._inductor.output_code.cudagraph_post_compile). vnpu compiles npu graphs as CPU graphs, for
which inductor records nothing, so the same checks and the same wrapping happen here, with torch_npu's
NPU graph trees (torch_npu.npu._graph_tree) in place of the CUDA ones:

* a graph that cannot be recorded (a tensor on the CPU, an operator that needs the host to read the device,
  unbacked symbolic sizes, inputs it mutates that are not static, an input whose storage it replaces,
  non-tensor inputs, dynamic shapes under config.triton.cudagraph_skip_dynamic_graphs) runs without a
  graph, and the skip is reported and counted as inductor counts cudagraph skips;
* otherwise the first call of each input layout creates the tree function (warm-up, recording, replay),
  the forward tells the backward which device's tree it runs in, and a backward that runs without a
  graph still tells that tree that the backward is running (inductor's "backward generation" rule);
* with config.triton.cudagraph_trees = False, one NPU graph per input layout replays without a tree
  (torch_npu._inductor.graph_runner), as inductor's and torch_npu's plain graphify do.

Lowering-time reasons inductor finds while lowering a CUDA graph (a few operators mark themselves unsafe
there) are not seen: the graph was lowered for the CPU. Those operators are refused at capture instead.
"""

import functools
import threading

import torch


def cpu_node_reason(gm):
    """ "cpu device (<node>)" when the graph has a tensor on the CPU (as inductor says it of a CUDA graph), else
    None. Read before the graph is rewritten for the host, when its devices are still the program's. With
    torch_npu._inductor.config.npugraph_trees.disable_cpu_input_check, CPU tensors are allowed, except a CPU scalar
    input (a replay would keep its first value). The reasons are backend="npugraphs"' own (utils._graph_tree)."""
    from torch._dynamo.backends.cudagraphs import get_device_node_mapping

    from torch_npu._inductor import config as npu_config
    from torch_npu.utils import _graph_tree

    if npu_config.npugraph_trees.disable_cpu_input_check:
        return _graph_tree.cpu_scalar_reason(gm)
    return _graph_tree.cpu_node_reason(get_device_node_mapping(gm).get(torch.device("cpu")))


def _skip_reason(gm, example_inputs, compiled, static_input_idxs):
    """Why inductor would not record this graph, or None."""
    from torch._inductor import config
    from torch._inductor.cudagraph_utils import (
        check_for_mutation_ignore_cuda_graph_managed_tensor,
        format_default_skip_message,
        get_input_storage_mutation_info,
        get_input_storage_mutation_reason,
    )
    from torch._inductor.utils import any_is_symbolic, get_first_incompatible_cudagraph_node

    if config.triton.cudagraph_skip_dynamic_graphs and any(
        any_is_symbolic(x) for x in example_inputs if isinstance(x, torch.Tensor | torch.SymInt)
    ):
        return "graph with symbolic shapes inputs and config.triton.cudagraph_skip_dynamic_graphs=True."
    node = get_first_incompatible_cudagraph_node(gm)
    if node is not None:
        return f"incompatible op {node.target}"
    if not config.triton.cudagraph_support_input_mutation:
        mutation = check_for_mutation_ignore_cuda_graph_managed_tensor(
            gm, compiled.mutated_inputs, compiled.mutated_input_idxs, static_input_idxs
        )
        if mutation is not None:
            return mutation.removeprefix(format_default_skip_message(""))
    storage = get_input_storage_mutation_reason(get_input_storage_mutation_info(gm))
    if storage is not None:
        return storage
    if config.force_disable_cudagraph_TESTING_ONLY:
        return "force_disable_cudagraph_TESTING_ONLY"
    if not all(isinstance(x, torch.Tensor | torch.SymInt | torch.Generator) for x in example_inputs):
        return "non-Tensor inputs"
    return None


def _stack_traces(gm):
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    return output.meta.get("output_stack_traces") or [
        arg.stack_trace if isinstance(arg, torch.fx.Node) else None for arg in output.args[0]
    ]


def _running_backward(run, device_index):
    """A backward that runs without a graph: the tree its forward recorded into learns that the backward runs."""
    from torch_npu.npu._graph_tree import get_manager

    manager = get_manager(device_index, create_if_none_exists=False)
    if manager is None:
        return run

    def backward(inputs):
        manager.set_to_running_backward()
        return run(inputs)

    backward._boxed_call = True
    return backward


def npugraph_tree_call(run, gm, example_inputs, compiled, device_index, kwargs, cpu_reason=None):
    """`run` (boxed host-compiled code of gm) under the NPU graph trees, or as it is with the skip reported
    (cpu_reason: cpu_node_reason of the graph as the program traced it)."""
    from torch._dynamo import utils as dynamo_utils
    from torch._inductor import config
    from torch._inductor.cudagraph_utils import (
        format_default_skip_message,
        get_placeholder_info,
        log_cudagraph_skip_and_bump_counter,
    )
    from torch._inductor.utils import BoxedBool

    from torch_npu.npu import _graph_tree

    enabled = kwargs.get("cudagraphs")  # shared by a forward and its backward
    is_backward = bool(kwargs.get("is_backward"))
    forward_device = kwargs.get("boxed_forward_device_index")
    if enabled is not None and not enabled:  # the forward was not recorded: neither is its backward
        return run
    static_input_idxs = tuple(kwargs.get("static_input_idxs") or ())
    reason = cpu_reason or _skip_reason(gm, example_inputs, compiled, static_input_idxs)
    if reason is not None:
        log_cudagraph_skip_and_bump_counter(format_default_skip_message(reason))  # inductor's words, as torch_npu
        if enabled is not None:
            BoxedBool.disable(enabled)
        if is_backward and forward_device is not None and forward_device.value is not None:
            return _running_backward(run, forward_device.value)
        return run
    if not config.triton.cudagraph_trees:
        from torch_npu._inductor.graph_runner import NpuGraphRunner

        return NpuGraphRunner(run, static_input_idxs, device_index=device_index, name=run.name)
    is_inference = bool(kwargs.get("is_inference"))
    if forward_device is not None and not is_inference and not is_backward:
        forward_device.set(device_index)
    tree_function = functools.partial(
        _graph_tree.npugraphify_impl,
        device_index=device_index,
        stack_traces=_stack_traces(gm),
        is_backward=is_backward,
        is_inference=is_inference,
        constants=(),  # constants of a CPU-lowered graph are host tensors, never in an npu pool
        placeholders=tuple(get_placeholder_info(gm.graph)),
        mutated_input_idxs=tuple(compiled.mutated_input_idxs),
        compile_id=torch._guards.CompileContext.current_compile_id(),
    )
    per_thread = threading.local()

    def tree_call(inputs):
        function = getattr(per_thread, "function", None)
        if function is None:
            with dynamo_utils.preserve_rng_state():
                function = tree_function(run, inputs, static_input_idxs)
            per_thread.function = function
        return function(inputs)

    tree_call._boxed_call = True
    return tree_call
