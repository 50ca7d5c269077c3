"""Bernoulli draws in npu graphs are the CPU's.

Inductor decomposes bernoulli (bernoulli_, bernoulli.p) into `rand_like(x) < p` on every device but the CPU,
where it keeps ATen's bernoulli and lowers it to that kernel: the CPU's compiled code then draws what eager CPU
code draws. Decompositions are chosen while AOT autograd traces the graph, when an npu graph's tensors are still
npu tensors; vnpu compiles npu graphs as CPU graphs afterwards (host_compile), so npu graphs keep bernoulli as the
CPU's graphs do, and compiled npu code draws the CPU's numbers (AlphaDropout, Dropout1d/2d/3d, bernoulli)."""

__all__ = ["keep_bernoulli_on_npu"]


def _keep_aten_bernoulli(self, *args, **kwargs):
    return NotImplemented  # as for a CPU tensor: ATen's bernoulli stays in the graph


def _is_npu_call(self, *args):
    return self.device.type == "npu"


def keep_bernoulli_on_npu():
    """Applied by torch_npu._patches when torch._decomp.decompositions_for_rng is imported."""
    import torch
    from torch._decomp import decompositions_for_rng as rng

    from torch_npu._inductor.decomposition_choice import answer_npu_calls_as_on_the_cpu

    aten = torch.ops.aten
    rules = dict.fromkeys((aten.bernoulli_.float, aten.bernoulli_.Tensor, aten.bernoulli.p), _keep_aten_bernoulli)
    changed = False
    for table in (rng.extra_random_decomps, rng.rng_decompositions):
        changed |= answer_npu_calls_as_on_the_cpu(table, rules, _is_npu_call)
    return changed
