"""Bernoulli draws in npu graphs are the CPU's.

Inductor decomposes bernoulli (bernoulli_, bernoulli.p) into `rand_like(x) < p` on every device but the CPU,
where it keeps ATen's bernoulli and lowers it to that kernel: the CPU's compiled code then draws what eager CPU
code draws. Decompositions are chosen while AOT autograd traces the graph, when an npu graph's tensors are still
npu tensors; vnpu compiles npu graphs as CPU graphs afterwards (host_compile), so npu graphs keep bernoulli as the
CPU's graphs do, and compiled npu code draws the CPU's numbers (AlphaDropout, Dropout1d/2d/3d, bernoulli)."""

import functools

__all__ = ["keep_bernoulli_on_npu"]


def _as_on_the_cpu(decomposition):
    @functools.wraps(decomposition)
    def bernoulli(self, *args, **kwargs):
        if self.device.type == "npu":
            return NotImplemented  # as for a CPU tensor: ATen's bernoulli stays in the graph
        return decomposition(self, *args, **kwargs)

    bernoulli._vnpu_keeps_npu = True
    return bernoulli


def keep_bernoulli_on_npu():
    """Applied by torch_npu._patches when torch._decomp.decompositions_for_rng is imported."""
    import torch
    from torch._decomp import decompositions_for_rng as rng

    aten = torch.ops.aten
    changed = False
    for table in (rng.extra_random_decomps, rng.rng_decompositions):
        for op in (aten.bernoulli_.float, aten.bernoulli_.Tensor, aten.bernoulli.p):
            decomposition = table.get(op)
            if decomposition is not None and not getattr(decomposition, "_vnpu_keeps_npu", False):
                table[op] = _as_on_the_cpu(decomposition)
                changed = True
    return changed
