"""Inductor for npu graphs: compiled as the CPU graph they compute, run on npu memory.

torch_npu's inductor backend lowers npu graphs for the card and generates Triton-Ascend kernels. vnpu's
chip is the host CPU and npu memory is host memory, so the kernels that compute an npu graph fastest
are the ones inductor generates for the same graph on the CPU. For each graph AOT autograd hands to
inductor (forward, backward, inference), `host_inner_compile`:

1. rewrites the graph's npu devices to the CPU and presents CPU fake tensors of the same sizes,
   strides and dtypes to inductor, which lowers, fuses and generates C++/OpenMP code exactly as for
   a CPU graph (including inductor's CPU-only choices: two-pass variance, mkldnn paths, ...);
2. runs the compiled code on CPU aliases of the npu inputs (no copies), with every buffer it
   allocates taken from the npu device's pools (torch.npu.memory_*, capacity, OOM and the profiler
   see them), and turns the results back into npu tensors (views of inputs stay views);
3. with mode="reduce-overhead", hands it to the NPU graph trees (torch_npu.npu._graph_tree), as
   torch_npu's inductor does: warm-up, recording, replay, outputs overwritten by the next replay and
   one memory pool per device shared by the forward and backward graphs. Inside a capture the code
   joins the NPU graph as one host kernel that each replay runs again.
4. under AOTInductor (aoti_compile_and_package), leaves the CPU model's files, declared as an npu model:
   the npu runner of csrc/compile/AotiModelRunner.cpp loads them and runs them as in 2.

Compiled npu code therefore computes exactly what compiled CPU code computes. What differs from the
card: random numbers drawn inside compiled graphs come from inductor's CPU seeds (as on the CPU).
"""

import contextlib
import functools
import json
import os
import tempfile

import torch
from torch._inductor.utils import BoxedBool
from torch._inductor.virtualized import V

from torch_npu import _C


def _npu_index(device):
    return torch.npu.current_device() if device.index is None else device.index


def _npu_devices(gm, example_inputs):
    found = {_npu_index(x.device) for x in example_inputs if isinstance(x, torch.Tensor) and x.device.type == "npu"}
    for node in gm.graph.nodes:
        value = node.meta.get("val")
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, torch.Tensor) and v.device.type == "npu":
                found.add(_npu_index(v.device))
    return found


def _to_host(value):
    if isinstance(value, torch.device) and value.type == "npu":
        return torch.device("cpu")
    if isinstance(value, str) and (value == "npu" or value.startswith("npu:")):
        return "cpu"
    if isinstance(value, (list, tuple)):
        return type(value)(_to_host(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_host(v) for k, v in value.items()}
    return value


def _host_twin(x):
    """A CPU tensor (fake or real) with x's sizes, strides, offset and dtype, for inductor to lower."""
    if not isinstance(x, torch.Tensor) or x.device.type != "npu":
        return x
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(x, FakeTensor):
        with x.fake_mode:
            if x.storage_offset() == 0:
                twin = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device="cpu")
            else:  # keep the offset: inductor's alignment decisions read it
                extent = x.storage_offset() + 1 + sum((n - 1) * s for n, s in zip(x.size(), x.stride()))
                twin = torch.empty(extent, dtype=x.dtype, device="cpu").as_strided(
                    x.size(), x.stride(), x.storage_offset()
                )
            return twin.requires_grad_(x.requires_grad)
    return _C._cpu_alias(x.detach())


def _output_devices(gm):
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    flags = []
    for arg in output.args[0]:
        value = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
        flags.append(isinstance(value, torch.Tensor) and value.device.type == "npu")
    return flags


def _attribute_to_host(gm, target):
    from torch._inductor.freezing_utils import is_frozen_param

    *path, name = target.split(".")
    owner = functools.reduce(getattr, path, gm)
    value = getattr(owner, name)
    if isinstance(value, torch.Tensor) and value.device.type == "npu":
        # the same memory, kept alive by the alias; made without the dispatcher (compilation runs under AOT
        # autograd's fake-tensor mode, where a detach() would give a fake tensor)
        host = _C._cpu_alias(value)
        if isinstance(value, torch.nn.Parameter):
            host = torch.nn.Parameter(host, requires_grad=value.requires_grad)
        if is_frozen_param(value):
            host._is_frozen_param = True  # (torch._inductor.freezing_utils' mark, which the cache key reads)
        setattr(owner, name, host)


def translate_to_host(gm, example_inputs):
    """Rewrites gm (in place) to compute on the CPU; returns the CPU example inputs. Every value keeps
    the sizes and strides it was traced with (the graph's views rely on them)."""
    from torch.utils._pytree import tree_map

    host_inputs = [_host_twin(x) for x in example_inputs]
    # constants of the graph (the parameters freezing folded in, and those it left unused, which inductor's
    # cache key still reads)
    attributes = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    attributes.update(name for name, value in vars(gm).items() if isinstance(value, torch.Tensor))
    attributes.update(gm._parameters, gm._buffers)
    for target in sorted(attributes):
        _attribute_to_host(gm, target)
    for module in gm.modules():  # the graph and its subgraphs (the branches of torch.cond, loop bodies, ...)
        if isinstance(module, torch.fx.GraphModule):
            for node in module.graph.nodes:
                node.args = _to_host(node.args)
                node.kwargs = _to_host(node.kwargs)
                if "val" in node.meta:
                    node.meta["val"] = tree_map(_host_twin, node.meta["val"])
            module.recompile()
    return host_inputs


class HostCompiledCall:
    """Inductor's compiled code for an npu graph, called with npu tensors (boxed: a list of inputs)."""

    def __init__(self, fn, device_index, npu_results, name):
        self._boxed_call = True  # on the instance: wrappers copy the instance's attributes
        self.fn = fn
        self.device_index = device_index
        self.npu_results = npu_results
        self.name = name

    def __call__(self, args):
        inputs = list(args)
        args.clear()
        if _C._current_stream_capturing():
            return self._capture(inputs)
        return _C._run_on_host(self.fn, inputs, self.device_index, self.npu_results)

    def _capture(self, inputs):
        """Runs the code and adds it to the NPU graph being captured as one host kernel. The graph keeps the
        tensors it read and wrote as it keeps an operator's (those in the graph's pool by address); each replay
        runs the code again on them and writes its results into the tensors this call returned."""
        outputs = _C._run_on_host(self.fn, list(inputs), self.device_index, self.npu_results)
        reads = [x for x in inputs if isinstance(x, torch.Tensor)]
        writes = [x for x in outputs if isinstance(x, torch.Tensor)]
        template = [None if isinstance(x, torch.Tensor) else x for x in inputs]
        _C._graph_record_host_kernel(self.name, functools.partial(self._replay, template), reads, writes)
        return outputs

    def _replay(self, template, reads, writes):
        tensors = iter(reads)
        inputs = [next(tensors) if x is None else x for x in template]
        fresh = [x for x in _C._run_on_host(self.fn, inputs, self.device_index, self.npu_results)
                 if isinstance(x, torch.Tensor)]  # fmt: skip
        for static, result in zip(writes, fresh, strict=True):
            if static.data_ptr() != result.data_ptr():  # a view of an input is already in place
                static.copy_(result)


def host_inner_compile(gm, example_inputs, **kwargs):
    """compile_fx_inner for graphs with npu tensors (others are compiled as they are)."""
    from torch._inductor import config
    from torch._inductor.compile_fx import compile_fx_inner

    devices = _npu_devices(gm, example_inputs)
    if not devices:
        return compile_fx_inner(gm, example_inputs, **kwargs)
    if len(devices) > 1:
        raise NotImplementedError(
            f"torch.compile on vnpu compiles graphs on one npu device; this graph uses npu "
            f"devices {sorted(devices)}. Keep a compiled region on one device."
        )
    from torch_npu._inductor.config import check_npu_backend
    from torch_npu._inductor.fallback_list import eager_fallbacks, listed_operators

    backend = getattr(config, "npu_backend", "default")
    check_npu_backend(backend)
    if backend == "ascendc":  # its kernels are generated for the deterministic level in force, as torch_npu guards it
        from torch_npu.dynamo._deterministic_guard import install_npu_deterministic_level_guard

        install_npu_deterministic_level_guard()
    (device,) = devices
    npu_results = _output_devices(gm)
    trees = config.triton.cudagraphs  # mode="reduce-overhead": the NPU graph trees below, not inductor's CUDA ones
    if trees:
        from torch_npu._inductor.reduce_overhead import cpu_node_reason, npugraph_tree_call

        cpu_reason = cpu_node_reason(gm)
    from torch_npu._inductor.host_collectives import route_collectives_through_npu

    route_collectives_through_npu(gm)
    host_inputs = translate_to_host(gm, example_inputs)
    with eager_fallbacks(listed_operators()):
        compiled = compile_fx_inner(gm, host_inputs, **{**kwargs, "cudagraphs": BoxedBool(False)})
    if V.aot_compilation:  # AOTInductor: the files of a CPU model that the npu runner loads
        _declare_npu_model(compiled.filename)
        return compiled
    kind = "backward" if kwargs.get("is_backward") else "forward"
    run = HostCompiledCall(
        getattr(compiled, "current_callable", compiled), device, npu_results, name=f"inductor {kind} graph"
    )
    if trees:
        run = npugraph_tree_call(run, gm, example_inputs, compiled, device, kwargs, cpu_reason)
    if hasattr(compiled, "current_callable"):
        compiled.current_callable = run
        return compiled
    return run


def _declare_npu_model(files):
    """AOTInductor's package metadata names the device whose runner loads the model: npu (the runner in
    csrc/compile/AotiModelRunner.cpp, which runs the CPU model on npu memory). The CPU model of an npu graph is
    the CPU model of the same CPU graph, files and cache directory included, so the npu metadata is a file of its
    own (in an `npu` directory beside the cached one, same name: the package stores files by name) that replaces
    the cached one in the list the package is made from."""
    for i, name in enumerate(files if isinstance(files, list) else []):
        if isinstance(name, str) and name.endswith("_metadata.json"):
            with open(name) as f:
                metadata = json.load(f)
            metadata["AOTI_DEVICE_KEY"] = "npu"
            directory = os.path.join(os.path.dirname(name), "npu")
            os.makedirs(directory, exist_ok=True)
            # written whole then renamed: another process compiling the same graph may be reading it
            with tempfile.NamedTemporaryFile("w", dir=directory, suffix=".tmp", delete=False) as f:
                json.dump(metadata, f)
            files[i] = os.path.join(directory, os.path.basename(name))
            os.replace(f.name, files[i])


def _is_compile_fx_inner(inner_compile, module):
    """compile_fx_inner itself, or AOTInductor's partial of it."""
    if isinstance(inner_compile, functools.partial):
        inner_compile = inner_compile.func
    return inner_compile is None or inner_compile is module.compile_fx_inner


def _has_npu_tensors(values):
    return any(isinstance(v, torch.Tensor) and v.device.type == "npu" for v in values)


def wrap_compile_fx():
    """Applied by torch_npu._patches when torch._inductor.compile_fx is imported."""
    import sys

    module = sys.modules["torch._inductor.compile_fx"]
    original = module.compile_fx
    if getattr(original, "_vnpu_host_compile", False):
        return False

    @functools.wraps(original)
    def compile_fx(model_, example_inputs_, inner_compile=None, *args, **kwargs):
        if _is_compile_fx_inner(inner_compile, module):
            if isinstance(inner_compile, functools.partial):
                inner_compile = functools.partial(host_inner_compile, *inner_compile.args, **inner_compile.keywords)
            else:
                inner_compile = host_inner_compile
        npu = _has_npu_tensors(example_inputs_)
        # AOT autograd's cache would hand back the host-compiled graphs without their npu wrapping.
        cache_off = torch._functorch.config.patch(enable_autograd_cache=False) if npu else contextlib.nullcontext()
        with cache_off:
            return original(model_, example_inputs_, inner_compile, *args, **kwargs)

    compile_fx._vnpu_host_compile = True
    module.compile_fx = compile_fx
    return True
