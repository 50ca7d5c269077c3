"""NPU_INDUCTOR_FALLBACK_LIST: operators inductor leaves to their eager ATen kernels in npu graphs.

torch_npu reads a comma-separated list of operator names ("aten.div" — every overload —, or
"aten.add.Tensor") or "allfallback" (every operator inductor would lower). While inductor compiles an
npu graph, those operators' lowerings are replaced by inductor's own fallback lowering, so the
generated code calls the ATen kernel instead of a fused loop; CPU graphs and later compiles are not
affected. With "allfallback", view operators keep their lowerings: they only reinterpret memory and
generate no kernel. Names that do not resolve are ignored with a warning, as torch_npu does.
"""

import contextlib
import os
import warnings

import torch

ENV = "NPU_INDUCTOR_FALLBACK_LIST"
ALL = "allfallback"


def _overloads(name):
    namespace, _, rest = name.partition(".")
    packet, _, overload = rest.partition(".")
    try:
        found = getattr(getattr(torch.ops, namespace), packet)
        return [getattr(found, overload)] if overload else [getattr(found, o) for o in found.overloads()]
    except (AttributeError, RuntimeError):
        warnings.warn(
            f"{ENV}: cannot resolve operator {name!r}; it is ignored (expected names such as aten.div "
            f"for every overload or aten.add.Tensor, separated by commas, or {ALL!r})",
            stacklevel=2,
        )
        return []


def listed_operators(value=None):
    """The operators the variable names that reach inductor's lowering: operators inductor decomposes
    (aten.gelu, ...) arrive as their parts, as on torch_npu. "allfallback": every lowered operator
    that is not a view."""
    from torch._inductor.decomposition import decompositions
    from torch._inductor.lowering import lowerings

    value = (os.environ.get(ENV, "") if value is None else value).strip()
    if value == ALL:
        candidates = [op for op in lowerings if isinstance(op, torch._ops.OpOverload) and not op.is_view]
    else:
        candidates = [op for name in value.split(",") if name.strip() for op in _overloads(name.strip())]
    return [op for op in candidates if op in lowerings and op not in decompositions]


@contextlib.contextmanager
def eager_fallbacks(operators):
    """Inside: inductor lowers each of operators to a call of its ATen kernel (without the FX graph
    cache, whose key does not know the list)."""
    if not operators:
        yield
        return
    from torch._inductor import config, lowering

    missing = object()
    saved = {op: lowering.lowerings.get(op, missing) for op in operators}
    for op in operators:
        lowering.lowerings[op] = lowering.fallback_handler(op, add_to_fallback_set=False)
    try:
        with config.patch(fx_graph_cache=False):
            yield
    finally:
        for op, previous in saved.items():
            if previous is missing:
                del lowering.lowerings[op]
            else:
                lowering.lowerings[op] = previous
