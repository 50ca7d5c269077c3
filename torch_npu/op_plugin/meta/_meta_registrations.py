"""Importing this module guarantees every npu operator has its meta kernel, as torch_npu's does: vnpu registers
each operator's fake kernel with the operator (torch_npu.ops), so this imports the operator library.
`missing_meta_kernels()` lists the operators of the npu namespace that FakeTensor and torch.compile cannot trace.
`m` is torch_npu's Meta library of the npu namespace: extensions that add npu operators register their meta
kernels through it (`@torch.library.impl(m, "my_op", "Meta")`)."""

import torch

import torch_npu.ops  # noqa: F401  (defines the operators with their fake kernels)

__all__ = []

m = torch.library.Library("npu", "IMPL", "Meta")


def missing_meta_kernels():
    """Names of npu operators (overloads) with no Meta, composite or fake kernel."""
    from torch._library.simple_registry import singleton

    missing = []
    for qualname in torch._C._dispatch_get_all_op_names():
        if not qualname.startswith("npu::"):
            continue
        has_meta = any(
            torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key)
            for key in ("Meta", "CompositeImplicitAutograd", "CompositeExplicitAutograd")
        )
        name = qualname.split(".", 1)[0]
        if not has_meta and singleton.find(name).fake_impl.kernel is None:
            missing.append(qualname)
    return sorted(missing)
