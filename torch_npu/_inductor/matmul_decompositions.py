"""Small matmuls in npu graphs are decomposed as in CPU graphs.

Inductor rewrites a few matmul shapes into element-wise products and sums, and the choice depends on the
device: on the CPU a single-row addmm / mm against a single column or a small (<= 16 x 16) matrix, and a
[B, 1, K] x [B, K, 1] bmm, become a sum of products; on other devices only a single-column (K = 1) operand
does, as a broadcast multiply. The choice is made while AOT autograd traces the graph, when an npu graph's
tensors are still npu tensors, and a sum of products rounds differently from the BLAS kernel. vnpu compiles
npu graphs as CPU graphs, so for npu tensors these rules answer as for the CPU: a compiled npu graph holds
the CPU's graph and computes the CPU's bits (a batch-1 Linear(12, 1), for example)."""

import torch

__all__ = ["decompose_small_matmuls_as_on_the_cpu"]


def _on_npu(*tensors):
    return any(isinstance(t, torch.Tensor) and t.device.type == "npu" for t in tensors)


def _cpu_addmm(self, mat1, mat2, out_dtype=None, beta=1, alpha=1):
    from torch.fx.experimental.symbolic_shapes import guard_or_false, statically_known_true

    if statically_known_true(mat1.size(0) == 1) and statically_known_true(mat2.size(-1) == 1):
        out = torch.sum(mat1.squeeze(0) * mat2.squeeze(-1), dim=0, keepdim=True).unsqueeze(0)
        return alpha * out + beta * self
    if (
        statically_known_true(mat1.size(0) == 1)
        and guard_or_false(mat2.size(0) <= 16)
        and guard_or_false(mat2.size(1) <= 16)
    ):
        return alpha * (mat1.T * mat2).sum(dim=0, keepdim=True) + beta * self
    return NotImplemented


def _cpu_mm(self, other, out_dtype=None):
    from torch.fx.experimental.symbolic_shapes import guard_or_false, statically_known_true

    if (
        statically_known_true(self.size(-1) == 1)
        and statically_known_true(self.size(0) != 1)
        and statically_known_true(other.size(1) != 1)
        and statically_known_true(self.size(0) > 0)
        and statically_known_true(other.size(0) == 1)
        and self.dtype == other.dtype
        and guard_or_false((torch.numel(self) + torch.numel(other)) <= 32)
    ):
        return self * other
    if statically_known_true(self.size(0) == 1) and statically_known_true(other.size(-1) == 1):
        return torch.sum(self.squeeze(0) * other.squeeze(-1), dim=0, keepdim=True).unsqueeze(0)
    return NotImplemented


def _cpu_bmm(self, other, out_dtype=None):
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    if statically_known_true(self.shape[2] == 1) and statically_known_true(other.shape[1] == 1):
        return (self * other).contiguous()
    if statically_known_true(self.size(1) == 1) and statically_known_true(other.size(-1) == 1):
        return torch.sum(self.squeeze(1) * other.squeeze(-1), dim=1, keepdim=True).unsqueeze(1)
    return NotImplemented


def decompose_small_matmuls_as_on_the_cpu():
    """Applied by torch_npu._patches when torch._inductor.decomposition is imported."""
    from torch._inductor import decomposition
    from torch._inductor.decomposition import pw_cast_for_opmath

    from torch_npu._inductor.decomposition_choice import answer_npu_calls_as_on_the_cpu

    aten = torch.ops.aten
    # the functional overloads: AOT autograd's graphs hold no out= matmuls; the CPU's rules in opmath precision,
    # as inductor's own
    rules = {aten.addmm.default: _cpu_addmm, aten.mm.default: _cpu_mm, aten.bmm.default: _cpu_bmm}
    return answer_npu_calls_as_on_the_cpu(
        decomposition.decompositions, {op: pw_cast_for_opmath(rule) for op, rule in rules.items()}, _on_npu
    )
