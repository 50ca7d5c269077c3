"""Which aten operators the C++ redirect serves on npu (one place to audit the rules).

The dispatcher fills an operator's npu slot with, in order: a kernel registered for npu, then a
CompositeExplicitAutograd(NonFunctional) kernel, then CompositeImplicitAutograd, and only then
the npu fallback. Left alone, npu would therefore run composite kernels where the CPU runs its
own kernel: different numerics, out= round trips, device-selecting composites that do not know
npu. So the redirect is registered explicitly, at import, on every operator that has

* a CPU kernel (npu then runs exactly what the CPU runs), or
* a CompositeExplicitAutograd(NonFunctional) kernel and no CompositeImplicitAutograd kernel,

except

* operators the backend implements itself (``NATIVE``),
* pure view operators (transpose, select, expand...): their composite kernels only compute
  metadata on top of the native ``as_strided`` and are faster than a redirect,
* composites with device rules of their own (``DEVICE_RULE_COMPOSITES``): ``_pack_padded_sequence``
  reads its lengths on the CPU and returns batch_sizes on the CPU (PyTorch's rule for
  PackedSequence), ``_pin_memory`` refuses tensors that are not on the CPU; they run for npu tensors
  as they run for CUDA tensors,
* composites that only call other operators, the CPU's way too (``DEVICE_GENERIC_COMPOSITES``: stack is cat of
  its tensors, mean the mean over every dimension): the CPU has no kernel of its own for them, so npu runs the
  same composite and its callees take their own npu kernels,
* random operators without a Generator argument (randn, rand_like, randperm...): their composite
  kernels reach generator-taking operators, where the redirect routes the npu generator; run on
  the CPU they would draw from the CPU generator instead.

Operators added by future PyTorch releases are picked up by the same rules.
"""

import torch

NATIVE = frozenset(
    {
        "empty.memory_format",
        "empty_strided",
        "_efficientzerotensor",
        "native_dropout",
        "_copy_from",
        "_copy_from_and_resize",
        "view",
        "as_strided",
        "_reshape_alias",
        "resize_",
        "set_.source_Storage",
        "set_.source_Storage_storage_offset",
        "set_.source_Tensor",
        "set_",
        "record_stream",
    }
)

DEVICE_RULE_COMPOSITES = frozenset({"_pack_padded_sequence", "_pin_memory"})

DEVICE_GENERIC_COMPOSITES = frozenset({"stack", "mean"})


def _split(qualified):
    name, _, overload = qualified[len("aten::") :].partition(".")
    return name, overload


def _schema(qualified):
    name, overload = _split(qualified)
    try:
        return torch._C._get_schema("aten::" + name, overload)
    except RuntimeError:
        return None


def is_pure_view(schema):
    """Every return aliases an input and nothing is written."""
    returns = schema.returns
    return (
        len(returns) > 0
        and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)
        and not any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    )


def is_unrouted_random(qualified, schema):
    """A nondeterministic_seeded operator with no Generator argument to route."""
    if any("Generator" in str(a.type) for a in schema.arguments):
        return False
    name, overload = _split(qualified)
    # the overload's tags without building torch.ops packets for ~1,000 operators at import
    found = torch._C._get_operation_overload("aten::" + name, overload or "")
    return found is not None and torch.Tag.nondeterministic_seeded in found[2]


# The kernel bits of aten_kernels(), in the order of torch_npu._C._aten_operator_kernels()'s dispatch keys.
NPU, CPU, IMPLICIT, EXPLICIT, EXPLICIT_NON_FUNCTIONAL = (1 << i for i in range(5))


def aten_kernels():
    """{'add.Tensor': kernel bits} for every aten operator: one pass over the dispatcher in C++ (a Python
    query per operator and key costs about 0.1 s at import)."""
    from torch_npu import _C

    return dict(_C._aten_operator_kernels())


def redirected_operators():
    selected = []
    for short, kernels in aten_kernels().items():
        if short in NATIVE or short in DEVICE_RULE_COMPOSITES or short in DEVICE_GENERIC_COMPOSITES or kernels & NPU:
            continue
        if kernels & CPU:
            selected.append(short)
            continue
        if kernels & IMPLICIT or not kernels & (EXPLICIT | EXPLICIT_NON_FUNCTIONAL):
            continue
        qualified = "aten::" + short
        schema = _schema(qualified)
        if schema is None or is_pure_view(schema) or is_unrouted_random(qualified, schema):
            continue
        selected.append(short)
    return selected
