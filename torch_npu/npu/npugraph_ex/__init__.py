"""npugraph_ex: run torch.compile graphs as NPU graphs (warm up, capture, replay).

    model = torch.compile(model, backend="npugraph_ex", options={...})
    model = torch.compile(model, backend=torch_npu.npu.npugraph_ex.compile_fx)

Inference only, as on Ascend: a call that needs gradients runs the FX graph without capture. Replays
write into the captured outputs, so a result is valid until the next call (as with CUDA graph
trees); each new input shape is captured once.
"""

import torch

from torch_npu.npu.npugraph_ex import inference, scope  # noqa: F401

__all__ = ["compile_fx", "register_replacement"]

_replacements = []


def register_replacement(
    search_fn,
    replace_fn,
    example_inputs,
    trace_fn=None,
    extra_check=None,
    search_fn_pattern=None,
    scalar_workaround=None,
    skip_duplicates=False,
):
    """Rewrite every occurrence of search_fn's pattern into replace_fn's in graphs compile_fx
    compiles (a torch.fx subgraph rewrite)."""
    if not callable(search_fn) or not callable(replace_fn):
        raise TypeError("register_replacement expects search_fn and replace_fn functions")
    key = (search_fn, replace_fn)
    if skip_duplicates and any(k == key for k, _ in _replacements):
        return False
    _replacements.append((key, extra_check))
    return True


def _apply_replacements(gm):
    for (search_fn, replace_fn), _ in _replacements:
        torch.fx.subgraph_rewriter.replace_pattern(gm, search_fn, replace_fn)
    return gm


# torch.compile(backend="npugraph_ex", options={...}): torch_npu's option names. The honoured ones act
# as on Ascend; the others select Ascend kernel-build or memory-pool behaviour with no effect here.
OPTIONS = {
    "force_eager": "honoured: run the FX graph without capture",
    "clone_input": "honoured: False captures the caller's input tensors themselves (no input copies)",
    "clone_output": "honoured: True returns copies of the graph's outputs",
    "graph_dump_type": "honoured: 'txt' or 'py' writes the FX graph's code before capture",
    "graph_dump_path": "honoured: the folder graph_dump_type writes to (default: the working directory)",
    "pattern_fusion_pass": "honoured: False skips the register_replacement rewrites",
    "remove_noop_ops": "honoured: True removes no-op operators (views of the same shape, x + 0...)",
    "post_grad_custom_pre_pass": "honoured: a function applied to the FX graph before the rewrites",
    "post_grad_custom_post_pass": "honoured: a function applied to the FX graph after the rewrites",
    "capture_limit": "honoured: at most this many input shapes are captured; others run without capture",
    "frozen_parameter": "honoured: parameters are static inputs (always so on vnpu)",
    "use_graph_pool": "accepted: graphs share the device's graph memory pool",
    "reuse_graph_pool_in_same_fx": "accepted: memory-pool reuse inside one graph",
    "static_kernel_compile": "accepted: static-shape aclnn kernel builds (no kernels are built on vnpu)",
    "inplace_pass": "accepted: the re-inplacing pass of the Ascend compiler",
    "input_inplace_pass": "accepted: re-inplacing of mutated inputs",
}


def _check_options(options):
    options = dict(options or {})
    for name in options:
        if name not in OPTIONS:
            raise ValueError(f"Invalid option '{name}', allowed options: {sorted(OPTIONS)}")
    dump = options.get("graph_dump_type")
    if dump is not None and dump not in ("txt", "py"):
        raise ValueError(f"'{dump}' not in optional list ['txt', 'py'] (option graph_dump_type)")
    limit = options.get("capture_limit")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ValueError(f"option capture_limit must be a positive integer, got {limit!r}")
    return options


def _dump(gm, options):
    import os

    folder = options.get("graph_dump_path") or os.getcwd()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"npugraph_ex_graph_{id(gm):x}.{options['graph_dump_type']}")
    with open(path, "w") as f:
        f.write(gm.code if options["graph_dump_type"] == "py" else str(gm.graph))


def _remove_noop_ops(gm):
    from torch._inductor.fx_passes.post_grad import remove_noop_ops

    remove_noop_ops(gm.graph)
    gm.recompile()


def _is_static(x):
    return isinstance(x, torch.nn.Parameter) or getattr(x, "_dynamo_static_input_type", None) is not None


def compile_fx(gm, example_inputs=None, options=None):
    """A torch.compile backend that captures the FX graph in an NPU graph and replays it (inference:
    a call that needs gradients runs the graph without capture)."""
    from torch_npu._inductor.graph_runner import NpuGraphRunner

    options = _check_options(options)
    if isinstance(gm, torch.fx.GraphModule):
        if options.get("post_grad_custom_pre_pass"):
            options["post_grad_custom_pre_pass"](gm.graph)
        if options.get("remove_noop_ops"):
            _remove_noop_ops(gm)
        if _replacements and options.get("pattern_fusion_pass", True):
            gm = _apply_replacements(gm)
        if options.get("post_grad_custom_post_pass"):
            options["post_grad_custom_post_pass"](gm.graph)
        gm.recompile()
        if options.get("graph_dump_type"):
            _dump(gm, options)
    if options.get("force_eager"):
        return gm
    inputs = list(example_inputs or ())
    static = [
        i
        for i, x in enumerate(inputs)
        if isinstance(x, torch.Tensor) and (_is_static(x) or options.get("clone_input", True) is False)
    ]
    devices = [x.device.index for x in inputs if isinstance(x, torch.Tensor) and x.device.type == "npu"]
    runner = NpuGraphRunner(
        lambda args: gm(*args),
        static,
        device_index=devices[0] if devices else 0,
        name="npugraph_ex graph",
        max_recordings=options.get("capture_limit"),
    )
    parameters = list(gm.parameters()) if isinstance(gm, torch.nn.Module) else []

    def run(*args):
        if torch.is_grad_enabled() and (
            any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
            or any(p.requires_grad for p in parameters)
        ):
            return gm(*args)
        out = runner(list(args))
        if options.get("clone_output"):
            out = (
                type(out)(o.clone() if isinstance(o, torch.Tensor) else o for o in out)
                if isinstance(out, (list, tuple))
                else out.clone()
            )
        return out

    return run
