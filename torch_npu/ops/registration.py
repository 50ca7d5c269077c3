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
- ``devices``: where the kernel is registered (``("npu",)``; add ``"cpu"`` to run on CPU tensors too).

Operators in the ``npu`` namespace also become ``torch_npu.<name>``; ``torch.<name>`` raises
torch_npu's deprecation error.
"""
import torch
from torch.utils._pytree import tree_flatten

from torch_npu.ops._library import npu_lib

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
        inputs = list(ctx.saved_inputs)
        leaves, positions = [], []
        for i, value in enumerate(inputs):
            if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
                leaf = value.detach().requires_grad_(True)
                inputs[i] = leaf
                leaves.append(leaf)
                positions.append(i)
        with torch.enable_grad():
            outputs = kernel(*inputs, **ctx.saved_kwargs)
        flat_out, _ = tree_flatten(outputs)
        pairs = [(o, g) for o, g in zip(flat_out, grads)
                 if isinstance(o, torch.Tensor) and o.requires_grad and g is not None]
        result = [None] * len(inputs)
        if pairs and leaves:
            found = torch.autograd.grad([o for o, _ in pairs], leaves, [g for _, g in pairs], allow_unused=True)
            for i, g in zip(positions, found):
                result[i] = g
        return tuple(result)

    return backward, setup_context


def _has_kwarg_only_tensors(op):
    return any(arg.kwarg_only and "Tensor" in str(arg.type) for arg in op._schema.arguments)


def _autograd_kernel(op, kernel):
    """An Autograd kernel for operators with keyword-only tensors (torch.library.register_autograd refuses
    those): gradients flow to the positional tensor arguments, recomputed through the composition."""
    backward_fn, _ = _composition_backward(kernel)

    class Recomputed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, kwargs, *args):
            with torch._C._AutoDispatchBelowAutograd():
                out = op(*args, **kwargs)
            ctx.saved_inputs, ctx.saved_kwargs = args, kwargs
            flat, _ = tree_flatten(out)
            ctx.mark_non_differentiable(*[o for o in flat if isinstance(o, torch.Tensor) and not o.is_floating_point()])
            return out

        @staticmethod
        def backward(ctx, *grads):
            return (None, *backward_fn(ctx, *grads))

    def autograd_kernel(*args, **kwargs):
        return Recomputed.apply(kwargs, *args)

    return autograd_kernel


def _deprecated_torch_alias(name):
    def deprecated(*args, **kwargs):
        raise RuntimeError(f"torch.{name} is deprecated and will be removed in future version. "
                           f"Use torch_npu.{name} instead.")

    deprecated.__name__ = name
    return deprecated


def _schema_signature(op):
    """An inspect.Signature of an operator's schema (positional, then keyword-only arguments)."""
    import inspect

    params = []
    for arg in op._schema.arguments:
        kind = inspect.Parameter.KEYWORD_ONLY if arg.kwarg_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = arg.default_value if arg.has_default_value() else inspect.Parameter.empty
        params.append(inspect.Parameter(arg.name, kind, default=default))
    return inspect.Signature(params)


def _export(name):
    import torch_npu

    packet = getattr(torch.ops.npu, name)
    try:
        packet.__signature__ = _schema_signature(packet.default)
    except (AttributeError, TypeError):
        pass
    setattr(torch_npu, name, packet)
    if not hasattr(torch, name):
        setattr(torch, name, _deprecated_torch_alias(name))


def npu_op(schema, *, fake="composition", differentiable=False, backward=None, setup_context=None,
           devices=("npu",)):
    """Decorator: define `schema` and register the decorated function as its kernel (see module doc)."""
    namespace, local_schema = _split(schema)
    name = local_schema.split("(", 1)[0]
    lib = _library(namespace)
    lib.define(local_schema)
    qualname = f"{namespace}::{name}"

    def register(kernel):
        for device in devices:
            lib.impl(name, kernel, _DEVICE_KEYS[device])
        if fake == "composition":
            torch.library.register_fake(qualname, lib=lib)(kernel)
        elif fake is not None:
            torch.library.register_fake(qualname, lib=lib)(fake)
        if backward is not None:
            torch.library.register_autograd(qualname, backward, setup_context=setup_context, lib=lib)
        elif differentiable:
            overload = getattr(getattr(torch.ops, namespace), name.split(".")[0])
            overload = getattr(overload, name.split(".")[1] if "." in name else "default")
            if _has_kwarg_only_tensors(overload):
                lib.impl(name, _autograd_kernel(overload, kernel), "Autograd")
            else:
                bw, setup = _composition_backward(kernel)
                torch.library.register_autograd(qualname, bw, setup_context=setup, lib=lib)
        if namespace == "npu" and "." not in name:
            _export(name)
        return kernel

    return register
