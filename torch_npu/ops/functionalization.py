"""Functionalization of npu's in-place operators (torch.compile, torch.func.functionalize, export).

PyTorch cannot functionalize a custom operator that returns an alias of a mutated input by itself. As
torch_npu registers it in C++, each in-place operator here gets a Functionalize kernel that runs its
out-of-place counterpart on the unwrapped inputs and installs the result as the new value of `self`; the
traced graph holds the functional operator, and the mutation of the graph input becomes one copy_ at its end.
"""

import torch
from torch.utils._pytree import tree_map

from torch_npu.ops._library import npu_lib

__all__ = ["functionalized_by"]

_FUNCTIONALIZE = torch._C.DispatchKeySet(torch._C.DispatchKey.Functionalize)


def _unwrap(value):
    if isinstance(value, torch.Tensor) and torch._is_functional_tensor(value):
        torch._sync(value)
        return torch._from_functional_tensor(value)
    return value


def functionalized_by(inplace_name, functional):
    """Register npu::<inplace_name> (mutating its first argument) to functionalize as npu::<functional> (a name),
    or as a composition of ATen operators (a function of the same arguments returning the new value)."""

    def kernel(target, *args, **kwargs):
        compute = getattr(torch.ops.npu, functional) if isinstance(functional, str) else functional
        with torch._C._ExcludeDispatchKeyGuard(_FUNCTIONALIZE):
            result = compute(_unwrap(target), *tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
        torch._functionalize_replace(target, result)
        torch._functionalize_commit_update(target)
        torch._functionalize_sync(target)
        return target

    npu_lib.impl(inplace_name, kernel, "Functionalize")
