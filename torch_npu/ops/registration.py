"""Defining NPU operators in Python: schema, npu kernel, fake kernel and backward in one place.

    import torch, torch_npu
    from torch_npu.ops import npu_op

    @npu_op("mylib::relu6(Tensor x) -> Tensor", differentiable=True)
    def relu6(x):
        return x.clamp(0, 6)

    torch.ops.mylib.relu6(torch.randn(4, device="npu"))

- ``schema``: ``"name(...) -> ..."`` (the ``npu`` namespace, torch_npu's own operators) or
  ``"ns::name(...) -> ..."`` for your own namespace.
- The decorated function is the kernel. It runs on npu tensors and should be a composition of
  ATen operators (those run zero-copy on the npu's memory).
- ``fake="composition"`` (default) also uses the kernel as the fake/Meta kernel, so FakeTensor,
  ``torch.compile(fullgraph=True)`` and ``torch.export`` trace through the operator; that needs a
  kernel that does not read tensor values. Pass a function for a separate fake kernel, None for none.
- ``differentiable=True`` makes the backward the autograd of the composition (recomputed in
  backward), with respect to the positional tensor arguments; or pass ``backward=`` and
  ``setup_context=`` as for torch.library.register_autograd.
- ``dtypes={"x": (torch.float16, ...)}`` with ``api="aclnnXxx"``: the dtypes the Ascend kernel accepts
  per tensor argument; others are refused with CANN's EZ1001 text (``torch_npu.ops.dtype_support``).
- ``devices``: where the kernel is registered (``("npu",)``; add ``"cpu"`` to run on CPU tensors too).

Operators in the ``npu`` namespace also become ``torch_npu.<name>`` (``torch.<name>`` raises
torch_npu's deprecation error), as do those of the ``atb`` namespace (op-plugin's ATB operators).
"""

import sys
import threading
from collections.abc import Callable

import torch
from torch.utils._pytree import tree_flatten

from torch_npu.ops._library import npu_lib, record_definition

__all__ = ["npu_op"]

_libraries = {"npu": npu_lib}
_DEVICE_KEYS = {"npu": "PrivateUse1", "cpu": "CPU", "meta": "Meta"}


def _library(namespace):
    if namespace not in _libraries:
        _libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")  # noqa: TOR901
    return _libraries[namespace]


def _split(schema):
    if "::" in schema.split("(", 1)[0]:
        namespace, rest = schema.split("::", 1)
        return namespace, rest
    return "npu", schema


def _composition_backward(kernel):
    """Backward = autograd of the kernel's composition, recomputed from the saved inputs."""

    def setup_context(ctx, inputs, output, keyword_only_inputs=None):
        ctx.saved_inputs = inputs
        ctx.saved_kwargs = dict(keyword_only_inputs or {})

    def backward(ctx, *grads):
        # Under create_graph (double backward) the recomputation starts from the inputs themselves, so the
        # gradients stay connected to them; otherwise from detached copies.
        create_graph = torch.is_grad_enabled()
        inputs, kwargs = list(ctx.saved_inputs), dict(ctx.saved_kwargs)
        leaves, places = [], []  # places: a positional index, or a keyword-only name

        def as_leaf(value):
            keep = create_graph and value.requires_grad
            return value if keep else value.detach().requires_grad_(True)

        for place, value in [*enumerate(inputs), *kwargs.items()]:
            if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
                leaf = as_leaf(value)
                if isinstance(place, int):
                    inputs[place] = leaf
                else:
                    kwargs[place] = leaf
                leaves.append(leaf)
                places.append(place)
        with torch.enable_grad():
            outputs = kernel(*inputs, **kwargs)
        flat_out, _ = tree_flatten(outputs)
        pairs = [
            (o, g) for o, g in zip(flat_out, grads) if isinstance(o, torch.Tensor) and o.requires_grad and g is not None
        ]
        result = [None] * len(inputs)
        ctx.keyword_grads = {}
        if pairs and leaves:
            found = torch.autograd.grad(
                [o for o, _ in pairs], leaves, [g for _, g in pairs], allow_unused=True, create_graph=create_graph
            )
            for place, g in zip(places, found):
                if isinstance(place, int):
                    result[place] = g
                else:
                    ctx.keyword_grads[place] = g
        return tuple(result)

    return backward, setup_context


def _takes_keyword_only_inputs(setup_context):
    import inspect

    try:
        return "keyword_only_inputs" in inspect.signature(setup_context).parameters
    except (TypeError, ValueError):
        return False


_operator_backward = threading.local()


def in_operator_backward() -> bool:
    """True on a thread while an npu operator's backward runs. On a card that backward is one kernel
    (torch_npu's npu_*_backward); here it may be a Python composition, whose inner calls tools that
    hook PyTorch's Python API (msprobe) must not see as operators of their own."""
    return getattr(_operator_backward, "depth", 0) > 0


def _autograd_kernel(op, backward, setup_context):
    """The operator's Autograd kernel: the forward runs below autograd, `setup_context(ctx, inputs, output
    [, keyword_only_inputs])` saves what `backward(ctx, *grads)` needs, and backward returns one gradient per
    positional argument — torch.library.register_autograd's contract, also for operators with keyword-only
    tensors (which register_autograd refuses), and without its per-operator class generation at import."""
    pass_keywords = _takes_keyword_only_inputs(setup_context)

    # Keyword-only tensors travel as trailing inputs of the autograd.Function (so autograd tracks them);
    # `keyword_names` says which keywords they are, `options` holds the other keyword-only values.
    def forward(ctx, options, keyword_names, positional_count, *tensors_and_args):
        args = tensors_and_args[:positional_count]
        kwargs = {**options, **dict(zip(keyword_names, tensors_and_args[positional_count:]))}
        ctx.keyword_names = keyword_names
        with torch._C._AutoDispatchBelowAutograd():
            out = op(*args, **kwargs)
        if pass_keywords:
            setup_context(ctx, args, out, keyword_only_inputs=kwargs)
        else:
            setup_context(ctx, args, out)
        flat, _ = tree_flatten(out)
        ctx.mark_non_differentiable(
            *[o for o in flat if isinstance(o, torch.Tensor) and not (o.is_floating_point() or o.is_complex())]
        )
        return out

    def run_backward(ctx, *grads):
        _operator_backward.depth = getattr(_operator_backward, "depth", 0) + 1
        try:
            result = backward(ctx, *grads)
        finally:
            _operator_backward.depth -= 1
        positional = result if isinstance(result, tuple) else (result,)
        keyword_grads = getattr(ctx, "keyword_grads", {})
        return (None, None, None, *positional, *(keyword_grads.get(name) for name in ctx.keyword_names))

    # Named as torch_npu names its nodes: npu_dtype_cast's grad_fn is NpuDtypeCastBackward.
    name = "".join(part.capitalize() for part in op._schema.name.split("::")[-1].split("_") if part)
    NpuOperatorFunction = type(
        name,
        (torch.autograd.Function,),
        {"forward": staticmethod(forward), "backward": staticmethod(run_backward)},
    )

    schema_arguments = op._schema.arguments

    def autograd_kernel(*args, **kwargs):
        positional, keyword_only = _with_defaults(schema_arguments, args, kwargs)
        names = tuple(k for k, v in keyword_only.items() if isinstance(v, torch.Tensor))
        options = {k: v for k, v in keyword_only.items() if k not in names}
        return NpuOperatorFunction.apply(
            options, names, len(positional), *positional, *(keyword_only[k] for k in names)
        )

    return autograd_kernel


def _with_defaults(schema_arguments, args, kwargs):
    """(every positional argument, every keyword-only argument) of a call, defaults filled in."""
    positional, keyword_only = [], {}
    for i, arg in enumerate(schema_arguments):
        if arg.kwarg_only:
            keyword_only[arg.name] = kwargs[arg.name] if arg.name in kwargs else arg.default_value
        elif i < len(args):
            positional.append(args[i])
        else:
            positional.append(kwargs[arg.name] if arg.name in kwargs else arg.default_value)
    return positional, keyword_only


def _host_compiled_kernel(kernel, qualname):
    """The operator's CPU kernel: torch.compile runs npu graphs as host code on CPU aliases of the npu
    tensors (torch_npu._inductor.host_compile), where the operator computes as on npu. Anywhere else a
    CPU tensor is a mistake, refused as torch_npu refuses it."""
    from torch_npu import _C

    def cpu_kernel(*args, **kwargs):
        if not _C._in_host_compiled_region():
            raise NotImplementedError(
                f"Could not run '{qualname}' with arguments from the 'CPU' backend: "
                "torch_npu operators take npu tensors (move the inputs with .npu())"
            )
        return kernel(*args, **kwargs)

    return cpu_kernel


# torch_npu.<name> operators of the npu namespace, in definition order, and what wants to hear of later
# ones (the patch registry gives each a torch.<name> alias raising torch_npu's deprecation error).
EXPORTED = []
# Namespaces besides npu whose operators torch_npu also offers as torch_npu.<name>: op-plugin's ATB operators
# (torch.ops.atb._npu_paged_attention is torch_npu._npu_paged_attention).
EXPORTED_NAMESPACES = ("atb",)
# The ATB operators torch_npu offers as torch_npu.atb.<name> instead (op-plugin's list of them).
ATB_MODULE_OPERATORS = frozenset(
    {
        "npu_paged_cache_load", "npu_multi_head_latent_attention", "_npu_paged_attention_v2",
        "_npu_paged_attention_v2_get_workspace", "_npu_flash_attention_v2",
        "_npu_flash_attention_prefix_v2", "npu_fused_add_topk_div", "npu_ring_mla", "npu_self_attention_prefix_encoder",
        "npu_mla_preprocess",
    }
)  # fmt: skip
EXPORT_LISTENERS = []
KERNEL_DOCS = {}  # operator name -> its kernel's docstring (torch_npu._op_plugin_docs attaches them)


def _register_fake(qualname, fake, lib):
    """torch.library.register_fake(qualname, lib=lib)(fake) without its caller lookup: register_fake reads the
    calling frame's source line and module with inspect (~0.2 ms per operator, a fifth of torch_npu's import);
    the registration names the fake function's own file and line instead."""
    code = getattr(fake, "__code__", None)
    source = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else qualname
    entry = torch._library.simple_registry.singleton.find(qualname)
    lib._registration_handles.append(entry.fake_impl.register(fake, source, lib=lib))


def _schema_signature(op):
    """An inspect.Signature of an operator's schema (positional, then keyword-only arguments)."""
    import inspect

    params = []
    for arg in op._schema.arguments:
        kind = inspect.Parameter.KEYWORD_ONLY if arg.kwarg_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = arg.default_value if arg.has_default_value() else inspect.Parameter.empty
        params.append(inspect.Parameter(arg.name, kind, default=default))
    return inspect.Signature(params)


class NpuOperatorPacket(torch._ops.OpOverloadPacket):
    """torch.ops.npu.<name> as torch_npu exports it, with its Python bindings' argument forms: `input=` names
    the `self` argument (torch_npu.fast_gelu(input=x)), `out=` (a tensor, or a tuple for several) fills the
    written keyword arguments of the `.out` overload (torch_npu.npu_apply_adam_w(..., out=(var, m, v))), also
    when the `.out` overload is called itself, and `device=` takes a device index as torch's factories do
    (torch_npu.empty_with_format(..., device=1) is npu:1)."""

    def __getattr__(self, key):
        overload = super().__getattr__(key)
        if key == "out" and type(overload) is torch._ops.OpOverload:
            overload = NpuOutOverload(self, overload._op, overload._op_dk, overload._schema, overload._tags)
            setattr(self, key, overload)
        return overload

    def __call__(self, *args, **kwargs):
        if not args and "input" in kwargs and "self" not in kwargs:
            kwargs["self"] = kwargs.pop("input")
        if "out" in kwargs and "out" in self.overloads():
            return self.out(*args, **_out_arguments(self.out._schema, kwargs))
        device = kwargs.get("device")
        if isinstance(device, int) and not isinstance(device, bool):
            kwargs["device"] = torch.device("npu", device)
        return self._op(*args, **kwargs)


class NpuOutOverload(torch._ops.OpOverload):
    """torch_npu.<name>.out as torch_npu's bindings take it: out= (a tensor, or a list or tuple for several)
    fills the written keyword arguments (torch_npu.npu_fused_infer_attention_score.out(..., out=[attn, lse]));
    the named form works as on torch.ops.npu."""

    def __call__(self, /, *args, **kwargs):
        if "out" in kwargs:
            kwargs = _out_arguments(self._schema, kwargs)
        return self._op(*args, **kwargs)


def written_arguments(schema):
    """The names of an out= overload's keyword-only arguments it writes (its results), in order."""
    return [a.name for a in schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


def _out_arguments(schema, kwargs):
    written = written_arguments(schema)
    if written == ["out"]:
        return kwargs
    out = kwargs.pop("out")
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if len(outs) != len(written):
        raise TypeError(f"{schema.name}: out= takes {len(written)} tensors ({', '.join(written)}), got {len(outs)}")
    return {**kwargs, **dict(zip(written, outs))}


def exported_packet(packet, packet_class=None):
    """torch.ops.npu.<name> as torch_npu exports it: an NpuOperatorPacket (or packet_class, a subclass with an
    operator's own argument forms) when its Python bindings take arguments the schema does not, else the packet."""
    arguments = packet.default._schema.arguments if hasattr(packet, "default") else []
    takes_self = bool(arguments) and arguments[0].name == "self"
    takes_device = any(a.name == "device" for a in arguments)
    if packet_class is None and not takes_self and not takes_device and "out" not in packet.overloads():
        return packet
    exported = object.__new__(packet_class or NpuOperatorPacket)
    exported.__dict__.update(packet.__dict__)
    exported.__dict__.pop("out", None)  # built again as an NpuOutOverload on first use
    return exported


def _export(name, namespace="npu"):
    import torch_npu

    if namespace != "npu":  # torch_npu's ATB operators: torch_npu.<name> or torch_npu.atb.<name>, no torch.<name>
        import torch_npu.atb

        module = torch_npu.atb if name in ATB_MODULE_OPERATORS else torch_npu
        setattr(module, name, getattr(getattr(torch.ops, namespace), name))
        if module is torch_npu.atb and name not in module.__all__:
            module.__all__.append(name)
        return
    record_definition(name, sys._getframe(1).f_globals["__name__"])  # (for operators defined without npu_op)

    packet = exported_packet(getattr(torch.ops.npu, name))
    overloads = packet.overloads()
    first = "default" if "default" in overloads else (overloads[0] if overloads else None)
    try:
        packet.__signature__ = _schema_signature(getattr(packet, first))
    except (AttributeError, TypeError):
        pass
    setattr(torch_npu, name, packet)
    if name not in EXPORTED:  # (a name is exported again when it gains an overload)
        EXPORTED.append(name)
    public = getattr(torch_npu, "__all__", None)  # torch_npu lists its public operators (see __init__)
    if public is not None and not name.startswith("_") and name not in public:
        public.append(name)
    for listener in EXPORT_LISTENERS:
        listener(name)


def _overload(namespace, name):
    packet = getattr(getattr(torch.ops, namespace), name.split(".")[0])
    return getattr(packet, name.split(".")[1] if "." in name else "default")


def npu_op(
    schema: str,
    *,
    fake: str | Callable | None = "composition",
    differentiable: bool = False,
    backward: Callable | None = None,
    setup_context: Callable | None = None,
    devices: tuple[str, ...] = ("npu",),
    dtypes: dict[str, tuple[torch.dtype, ...]] | None = None,
    api: str | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator: define `schema` and register the decorated function as its kernel (see module doc)."""
    namespace, local_schema = _split(schema)
    name = local_schema.split("(", 1)[0]
    lib = _library(namespace)
    lib.define(local_schema)
    qualname = f"{namespace}::{name}"

    def register(kernel):
        device_kernel = kernel
        if dtypes:
            from torch_npu.ops.dtype_support import dtype_checked

            overload = _overload(namespace, name)
            device_kernel = dtype_checked(kernel, overload._schema.arguments, dtypes, api or f"aclnn{name}")
        for device in devices:
            lib.impl(name, device_kernel, _DEVICE_KEYS[device])
        if "cpu" not in devices:
            lib.impl(name, _host_compiled_kernel(kernel, qualname), "CPU")
        if fake is not None:
            _register_fake(qualname, kernel if fake == "composition" else fake, lib)
        if backward is not None or differentiable:
            overload = _overload(namespace, name)
            bw, setup = (backward, setup_context) if backward is not None else _composition_backward(kernel)
            lib.impl(name, _autograd_kernel(overload, bw, setup), "Autograd")
        if namespace == "npu":
            record_definition(name, kernel.__module__)
        if namespace == "npu" and "." not in name:
            KERNEL_DOCS[name] = kernel.__doc__
            _export(name)
        elif namespace in EXPORTED_NAMESPACES:  # (some ATB operators have only an .out overload)
            _export(name.split(".")[0], namespace)
        elif namespace == "npu" and name.split(".")[0] in EXPORTED:  # an overload: torch_npu.<name> gains it
            _export(name.split(".")[0])
        return kernel

    return register
