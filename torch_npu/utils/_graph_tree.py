"""torch_npu.utils._graph_tree: the "npugraphs" Dynamo backend's decisions, under torch_npu's names.

Programs tune backend="npugraphs" through this module: they replace `check_for_skip` (for example to keep
graphs with operators their card cannot capture out of NPU graphs), set
`torch_npu._inductor.config.npugraph_trees.disable_cpu_input_check`, or call `npugraphify` /
`npugraphify_impl` themselves. The backend (torch_npu._inductor.backends) reads `check_for_skip` and
`get_device_index` from this module each time it compiles a graph, so a replacement takes effect.

* `check_for_skip(aot_model, num_fixed)`: why a graph runs without an NPU graph (inputs it mutates that are
  not fixed, a tensor on the CPU or on several devices, an operator unsafe to capture), in inductor's
  words ("skipping cudagraphs due to ..."), or None.
* `npugraphify_impl(model, inputs, static_input_idxs)`: one NPU graph of a boxed function, warmed up and
  recorded now, replayed by every call (torch_npu._inductor.graph_runner); `npugraphify(...)` makes it
  lazily, or a tree function of the NPU graph trees (torch_npu.npu._graph_tree) when
  torch._inductor.config.triton.cudagraph_trees is set.
"""

import functools
import logging

import torch

__all__ = []

log = logging.getLogger("torch_npu.aclgraph")


def npugraph_mark_step_begin():
    """Starts a new step of the NPU graph trees (torch.compiler.npugraph_mark_step_begin)."""
    from torch_npu.npu._graph_tree import mark_step_begin

    mark_step_begin()


def cpu_node_reason(cpu_node):
    """ "cpu device (<node>)" with the stack trace of its use, as inductor says it of a CUDA graph; None for no node."""
    from torch._inductor.cudagraph_utils import _get_use_stack_trace

    if cpu_node is None:
        return None
    trace = _get_use_stack_trace(cpu_node)
    return f"cpu device ({cpu_node.name}). Found from : \n {trace}" if trace else f"cpu device ({cpu_node.name})"


def check_multiple_devices_or_any_cpu_nodes(device_node_mapping):
    """A skip message when the graph has a tensor on the CPU (unless npugraph_trees.disable_cpu_input_check)
    or is not on exactly one npu device; None otherwise. Drops the CPU entry from the mapping when CPU
    tensors are allowed, as torch_npu does."""
    from torch._inductor.cudagraph_utils import format_default_skip_message

    from torch_npu._inductor import config as npu_config

    cpu = torch.device("cpu")
    if npu_config.npugraph_trees.disable_cpu_input_check:
        device_node_mapping.pop(cpu, None)
    reason = cpu_node_reason(device_node_mapping.get(cpu))
    if reason is not None:
        log.info("skip with cpu node: %s", reason)
        return format_default_skip_message(reason)
    if len(device_node_mapping) == 1 and next(iter(device_node_mapping)).type == "npu":
        return None
    devices = ", ".join(repr(device) for device in device_node_mapping)
    return format_default_skip_message(f"multiple devices: {devices}")


def check_for_skip(aot_model, num_fixed):
    """Why backend="npugraphs" runs this AOT graph without an NPU graph, or None."""
    from torch._dynamo.backends.cudagraphs import (
        check_for_mutation_ignore_cuda_graph_managed_tensor,
        get_device_node_mapping,
    )
    from torch._inductor.cudagraph_utils import format_default_skip_message
    from torch._inductor.utils import get_first_incompatible_cudagraph_node

    if not torch._dynamo.config.cudagraph_backend_support_input_mutation:
        mutation = check_for_mutation_ignore_cuda_graph_managed_tensor(aot_model, num_fixed)
        if mutation:
            return mutation
    devices = check_multiple_devices_or_any_cpu_nodes(get_device_node_mapping(aot_model))
    if devices:
        return devices
    scalar = cpu_scalar_reason(aot_model)
    if scalar is not None:
        return format_default_skip_message(scalar)
    node = get_first_incompatible_cudagraph_node(aot_model)
    if node is not None:
        return format_default_skip_message(f"incompatible op ({node.name})")
    return None


def cpu_scalar_reason(gm):
    """Why a graph with a CPU scalar input (a 0-dim CPU tensor: a Python number Dynamo passes as a tensor, a host
    scalar) is not captured, or None. Allowed CPU inputs (npugraph_trees.disable_cpu_input_check) are read again by
    each replay where an operator reads them as tensors; a scalar is taken by value at capture. The card's graph
    would keep that first value; vnpu runs such a graph without one instead of replaying a stale number."""
    for node in gm.graph.find_nodes(op="placeholder"):
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() == 0:
            return (
                f"cpu scalar input ({node.name}): its value is read when the graph is captured, so a replay would "
                "keep the first value"
            )
    return None


# the check_for_skip this module defines: the backend may capture an inference graph as Dynamo traced it only
# while this one decides (a program's replacement is given AOT autograd's graphs, as on torch_npu)
DEFINED_CHECK_FOR_SKIP = check_for_skip


def get_device_index(gm):
    """The npu device the graph runs on (its CPU tensors ignored under disable_cpu_input_check)."""
    from torch._dynamo.backends.cudagraphs import get_device_node_mapping

    from torch_npu._inductor import config as npu_config

    mapping = get_device_node_mapping(gm)
    if npu_config.npugraph_trees.disable_cpu_input_check:
        mapping.pop(torch.device("cpu"), None)
    device = next(iter(mapping), None)
    if device is None or device.type != "npu":
        raise RuntimeError("check device.type == npu fail")
    return device.index if device.index is not None else torch.npu.current_device()


def npugraphify_impl(model, inputs, static_input_idxs=()):
    """One NPU graph of `model` (boxed: it takes a list of inputs) for inputs like `inputs`: warmed up and
    recorded now, then every call copies its non-static inputs into the graph's buffers and replays it
    (static inputs must keep their memory). Returns the boxed replay function."""
    from torch._inductor.compile_fx import get_input_idxs_to_check
    from torch._inductor.utils import align_inputs_from_check_idxs, copy_misaligned_inputs, remove_unaligned_input_idxs
    from torch.utils._ordered_set import OrderedSet

    from torch_npu._inductor.graph_runner import NpuGraphRunner

    if not isinstance(inputs, list):
        raise RuntimeError("check isinstance(inputs, list) fail")
    check_input_idxs = get_input_idxs_to_check(inputs, static_input_idxs)
    static = remove_unaligned_input_idxs(inputs, static_input_idxs)
    copy_misaligned_inputs(inputs, check_input_idxs)
    devices = [x.device.index for x in inputs if isinstance(x, torch.Tensor) and x.device.type == "npu"]
    device_index = devices[0] if devices and devices[0] is not None else torch.npu.current_device()
    runner = NpuGraphRunner(model, static, device_index=device_index, name="npugraphify graph")
    runner.call(list(inputs))  # warm-up
    runner.call(list(inputs))  # recording
    # a misaligned input is copied to an aligned one first; what the function writes into it is not copied back
    return align_inputs_from_check_idxs(runner, check_input_idxs, OrderedSet())


def npugraphify(
    model,
    static_input_idxs=(),
    *,
    device_index,
    stack_traces,
    is_backward,
    is_inference,
    constants=(),
    placeholders=(),
    mutated_input_idxs=(),
):
    """A boxed function that graphs `model` on its first call: under the NPU graph trees when
    torch._inductor.config.triton.cudagraph_trees is set, else with npugraphify_impl."""
    from torch._dynamo import utils as dynamo_utils
    from torch._inductor import config

    if config.triton.cudagraph_trees:
        from torch_npu.npu._graph_tree import npugraphify_impl as tree_npugraphify_impl

        make = functools.partial(
            tree_npugraphify_impl,
            device_index=device_index,
            stack_traces=stack_traces,
            is_backward=is_backward,
            is_inference=is_inference,
            constants=constants,
            placeholders=placeholders,
            mutated_input_idxs=mutated_input_idxs,
        )
    else:
        make = npugraphify_impl
    compiled = None

    def run(new_inputs):
        nonlocal compiled
        if compiled is None:
            with dynamo_utils.preserve_rng_state():
                compiled = make(model, new_inputs, static_input_idxs)
        return compiled(new_inputs)

    return run


def npugraphs(dynamo_model, dynamo_inputs):
    """torch.compile(model, backend="npugraphs")."""
    from torch_npu._inductor.backends import npugraphs as backend

    return backend(dynamo_model, dynamo_inputs)


class NpugraphsBackend:
    """The "npugraphs" backend as an object: reset() drops the NPU graph trees."""

    compiler_name = "npugraphs"

    @staticmethod
    def reset():
        from torch_npu.npu._graph_tree import reset_npugraph_trees

        reset_npugraph_trees()

    @staticmethod
    def __call__(model, inputs):
        return npugraphs(model, inputs)
