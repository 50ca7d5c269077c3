"""torchair.inference: compiled inference helpers."""

import torch

__all__ = ["cache_compile", "readable_cache", "set_dim_gears"]


def cache_compile(
    func, *, config=None, dynamic=True, cache_dir=None, global_rank=None, tp_rank=None, pp_rank=None, **kwargs
):
    """torch.compile(func) with torchair's backend; the compiled function's source and settings are kept
    in cache_dir per rank (see torch_npu.npu.npugraph_ex.inference.cache_compile)."""
    from torch_npu.npu.npugraph_ex.inference import cache_compile as npu_cache_compile
    from torchair._backend import get_npu_backend

    compiled = npu_cache_compile(
        func, dynamic=dynamic, cache_dir=cache_dir, global_rank=global_rank, tp_rank=tp_rank, pp_rank=pp_rank
    )
    recompiled = torch.compile(func, backend=get_npu_backend(compiler_config=config), dynamic=dynamic)
    recompiled._npugraph_ex_cache = compiled._npugraph_ex_cache
    return recompiled


def readable_cache(cache_bin, print_output=True, file=None):
    from torch_npu.npu.npugraph_ex.inference import readable_cache as npu_readable_cache

    return npu_readable_cache(cache_bin, print_output=print_output, file=file)


def set_dim_gears(t, dim_gears):
    """On Ascend, compiles one graph per listed size ("gear") of each dimension. On vnpu the listed
    dimensions are marked dynamic (one graph serves every size); the gears are validated."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"set_dim_gears expects a tensor, got {type(t).__name__}")
    if not isinstance(dim_gears, dict) or not dim_gears:
        raise TypeError("dim_gears must be a non-empty dict {dimension: [sizes]}")
    for dim, gears in dim_gears.items():
        if not isinstance(dim, int) or not -t.dim() <= dim < t.dim():
            raise ValueError(f"dim_gears: dimension {dim} is out of range for a {t.dim()}-D tensor")
        if not isinstance(gears, (list, tuple)) or not gears or not all(isinstance(g, int) and g > 0 for g in gears):
            raise ValueError(f"dim_gears: the gears of dimension {dim} must be a non-empty list of positive ints")
        torch._dynamo.mark_dynamic(t, dim % t.dim())
    t._torchair_dim_gears = dict(dim_gears)
