"""The patch registry's declarations for torch.compile: Dynamo's and inductor's view of the npu device."""

from torch_npu._patches.registry import Patch

_INDUCTOR_CONFIG = "torch._inductor.config"
COMPILE_PATCHES = (
    Patch(
        target="torch._dynamo.device_interface.device_interfaces['npu']",
        module="torch._dynamo.device_interface",
        why="Dynamo and inductor ask the device interface for streams, events and device properties of "
        "the npu device; registered through register_interface_for_device, PyTorch's extension point.",
        when="on import of torch._dynamo.device_interface",
        apply="torch_npu._inductor.device_interface:register",
    ),
    Patch(
        target=f"{_INDUCTOR_CONFIG}.npu_backend",
        module=_INDUCTOR_CONFIG,
        why="torch_npu adds the npu_backend option to inductor's config (also torch.compile(options="
        "{'npu_backend': ...}) and TORCHINDUCTOR_NPU_BACKEND); inductor refuses options it does not know.",
        when="on import of torch._inductor",
        apply="torch_npu._inductor.config:add_npu_backend_option",
    ),
    Patch(
        target="torch._decomp.decompositions_for_rng.extra_random_decomps[bernoulli]",
        module="torch._decomp.decompositions_for_rng",
        why="inductor decomposes bernoulli into rand_like(x) < p on every device but the CPU, where ATen's "
        "bernoulli stays (so compiled CPU code draws eager CPU's numbers). Decompositions are chosen while an "
        "npu graph still holds npu tensors, before vnpu compiles it as the CPU graph it computes; npu graphs "
        "keep bernoulli as CPU graphs do, so compiled npu code draws what compiled CPU code draws.",
        when="on import of torch._decomp.decompositions_for_rng",
        apply="torch_npu._inductor.random_decompositions:keep_bernoulli_on_npu",
    ),
    Patch(
        target="torch._inductor.decomposition.decompositions[addmm, mm, bmm]",
        module="torch._inductor.decomposition",
        why="inductor turns some small matmuls into sums of products, choosing by device: the CPU's rules (a "
        "single-row addmm / mm against one column or a <= 16 x 16 matrix, a [B, 1, K] x [B, K, 1] bmm) differ "
        "from other devices'. The choice is made while an npu graph still holds npu tensors, before vnpu "
        "compiles it as the CPU graph it computes; for npu tensors the rules answer as for the CPU, so a "
        "compiled npu graph rounds as the compiled CPU graph does.",
        when="on import of torch._inductor.decomposition",
        apply="torch_npu._inductor.matmul_decompositions:decompose_small_matmuls_as_on_the_cpu",
    ),
    Patch(
        target="torch._inductor.compile_fx.compile_fx",
        module="torch._inductor.compile_fx",
        why="inductor compiles an npu graph as the CPU graph it computes (npu memory is host memory) and the "
        "result runs on CPU aliases of the npu tensors, its buffers from the npu pools: npu gets exactly "
        "the CPU's kernels, speed and results. compile_fx is inductor's entry point (torch.compile's "
        "default backend calls it); the wrapper hands it the npu-aware per-graph compiler and leaves "
        "graphs without npu tensors, and callers passing their own inner compiler, unchanged. While an npu "
        "graph compiles, the operators NPU_INDUCTOR_FALLBACK_LIST names are lowered by inductor's own "
        "fallback lowering (restored afterwards), as torch_npu's lowering does.",
        when="on import of torch._inductor.compile_fx",
        apply="torch_npu._inductor.host_compile:wrap_compile_fx",
    ),
    Patch(
        target="torch._C._aoti.AOTIModelContainerRunnerNpu",
        module="torch",
        why="torch_npu adds its AOTInductor runner of npu models to torch's AOTI module under this name; vnpu's "
        "runs the CPU model an npu graph compiles to on npu memory (aoti_load_package finds the same runner by "
        "the package's device key, registered in C++).",
        when="at import of torch_npu",
        apply="torch_npu._patches.aoti_runner:add_npu_runner",
    ),
    Patch(
        target="torch._export.aot_load",
        module="torch._export",
        why="aot_load knows the runners of cpu, cuda, xpu and mps only and raises 'Unsupported device npu'; "
        "torch_npu wraps it so that a model from torch._inductor.aot_compile loads with device 'npu' / 'npu:N' "
        "(through AOTIModelContainerRunnerNpu). Other devices go to the original.",
        when="on import of torch._export",
        apply="torch_npu._patches.aoti_runner:load_npu_models",
    ),
)

_DYNAMO_RUNTIME = "torch_npu._patches.dynamo_npu_runtime"
COMPILE_PATCHES += (
    Patch(
        target="torch._dynamo: in-graph classes torch.npu.Stream / Event, trace rules and the current_stream handler "
        "of torch.npu's stream functions",
        module="torch._dynamo",
        why="Dynamo builds CUDA's streams and events inside a graph and knows its stream functions by name; npu's are "
        "Python functions that initialise the device through C++, which Dynamo cannot trace, so code that creates or "
        "switches npu streams under torch.compile broke the graph (fullgraph=True failed). torch_npu adds the same "
        "entries.",
        when="on import of torch._dynamo",
        apply=f"{_DYNAMO_RUNTIME}:trace_streams_and_events",
    ),
    Patch(
        target="torch._dynamo.variables.torch: torch.npu.amp.autocast as a context manager Dynamo implements",
        module="torch._dynamo",
        why="Dynamo enters torch.cuda.amp.autocast() as an autocast region; torch.npu.amp.autocast() (what Ascend code "
        "writes) is the region torch.autocast('npu', ...) opens, and torch_npu maps it the same way.",
        when="on import of torch._dynamo",
        apply=f"{_DYNAMO_RUNTIME}:trace_autocast",
    ),
)

COMPILE_PATCHES += (
    Patch(
        target="torch._dynamo.backends.registry: backends npu, npugraphs, npugraph_ex",
        module="torch._dynamo.backends.registry",
        why="torch_npu registers its Dynamo backends by name when Dynamo's registry loads, so "
        "torch.compile(backend='npu') (torchair's default backend) and code listing _BACKENDS find them; each "
        "is built on first use.",
        when="on import of torch._dynamo.backends.registry",
        apply="torch_npu.dynamo:register_backends",
    ),
    Patch(
        target="torch._inductor.codegen.common.device_op_overrides_dict['npu']",
        module="torch._inductor.codegen.common",
        why="inductor looks up per-device host-code overrides by device type; npu graphs compile as the CPU graphs "
        "they compute, so npu's entry is the CPU's (registered through register_device_op_overrides).",
        when="on import of torch._inductor.codegen.common",
        apply="torch_npu.utils._inductor:register_device_op_overrides",
    ),
)
