"""Dynamo backends torch_npu documents beside inductor (registered as torch_dynamo_backends entry
points, so `torch.compile(backend="npugraphs")` finds them without importing anything early).

* "npugraphs": AOT autograd, then the forward and backward FX graphs captured into NPU graphs and
  replayed (no code generation) — PyTorch's "cudagraphs" backend for npu.
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
    return NpuGraphRunner(run, static, device_index=_device_index(gm), name=f"npugraphs {kind} graph")


def npugraphs(gm, example_inputs, **kwargs):
    """torch.compile(model, backend="npugraphs")."""
    from torch._dynamo.backends.common import aot_autograd
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
