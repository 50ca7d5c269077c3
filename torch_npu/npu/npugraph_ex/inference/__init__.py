"""npugraph_ex.inference: compiled inference functions whose compiled form is kept on disk."""

import hashlib
import inspect
import os
import sys

import torch

__all__ = ["cache_compile", "readable_cache"]


def cache_compile(
    func, *, dynamic: bool = True, cache_dir=None, global_rank=None, tp_rank=None, pp_rank=None, **kwargs
):
    """torch.compile(func) with the npugraph_ex backend. The compiled function's source and
    settings are written to cache_dir (default ./.npugraph_ex_cache) per rank, for readable_cache."""
    from torch_npu.npu.npugraph_ex import compile_fx

    cache_dir = cache_dir or os.path.join(os.getcwd(), ".npugraph_ex_cache")
    os.makedirs(cache_dir, exist_ok=True)
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        source = repr(func)
    ranks = f"rank{global_rank or 0}_tp{tp_rank or 0}_pp{pp_rank or 0}"
    name = getattr(func, "__qualname__", "func")
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = os.path.join(cache_dir, f"{name}.{ranks}.{digest}.cache")
    with open(path, "w") as f:
        f.write(f"function: {name}\nranks: {ranks}\ndynamic: {dynamic}\nbackend: npugraph_ex\n\n{source}")
    compiled = torch.compile(func, backend=compile_fx, dynamic=dynamic)
    compiled._npugraph_ex_cache = path
    return compiled


def readable_cache(cache_bin, print_output=True, file=None):
    """The contents of a cache file cache_compile wrote, printed (to `file`, default stdout) and returned."""
    with open(cache_bin) as f:
        text = f.read()
    if print_output:
        print(text, file=file or sys.stdout)
    return text
