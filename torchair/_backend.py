"""torchair's graph backend on vnpu: the ATen graphs GE would compile, run on npu (or replayed as NPU
graphs in mode="reduce-overhead")."""

import os

from torchair.configs import CompilerConfig


def _dump_graph(gm, config, kind):
    dump = config.debug.graph_dump
    if not dump.enabled:
        return
    folder = dump.path.value or "."
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"dynamo_{kind}_{id(gm):x}.{dump.type.value}")
    with open(path, "w") as f:
        f.write(gm.code if dump.type.value == "py" else str(gm.graph))


def get_compiler(compiler_config: CompilerConfig = None):
    """The FX-graph compiler get_npu_backend uses: (graph module, example inputs) -> callable."""
    config = compiler_config or CompilerConfig()
    if not isinstance(config, CompilerConfig):
        raise TypeError(f"compiler_config must be a torchair.CompilerConfig, got {type(config).__name__}")

    def compile_graph(gm, example_inputs, *, kind="forward", fixed=0, static=None):
        from torch._dynamo.backends.debugging import boxed_nop

        _dump_graph(gm, config, kind)
        run = boxed_nop(gm, example_inputs)
        if config.mode.value != "reduce-overhead" or config.debug.run_eagerly:
            return run
        from torch_npu._inductor.graph_runner import NpuGraphRunner, report_skip
        from torch_npu.utils import _graph_tree

        reason = _graph_tree.check_for_skip(gm, fixed)  # the npugraphs backend's rules
        if reason:
            report_skip(reason)
            return run
        return NpuGraphRunner(
            run,
            range(fixed) if static is None else static,
            device_index=_graph_tree.get_device_index(gm),
            name=f"torchair {kind} graph",
        )

    return compile_graph


def get_npu_backend(*, compiler_config: CompilerConfig = None, custom_decompositions: dict = None):
    """A torch.compile backend: torch.compile(model, backend=torchair.get_npu_backend(...))."""
    config = compiler_config or CompilerConfig()
    compile_graph = get_compiler(config)
    decompositions = dict(custom_decompositions or {})

    def npu_backend(gm, example_inputs, **kwargs):
        from torch._dynamo.backends.common import aot_autograd
        from torch._inductor.compile_fx import get_static_input_idxs
        from torch._inductor.utils import count_tangents, num_fw_fixed_arguments

        def forward(aot_gm, aot_inputs):
            fixed = num_fw_fixed_arguments(len(example_inputs), len(aot_inputs))
            return compile_graph(aot_gm, aot_inputs, kind="forward", fixed=fixed, static=get_static_input_idxs(fixed))

        def backward(aot_gm, aot_inputs):
            return compile_graph(aot_gm, aot_inputs, kind="backward", fixed=count_tangents(aot_gm))

        return aot_autograd(
            fw_compiler=forward,
            bw_compiler=backward,
            decompositions=decompositions,
            keep_inference_input_mutations=bool(config.experimental_config.keep_inference_input_mutations),
        )(gm, example_inputs)

    npu_backend.compiler_config = config
    return npu_backend
