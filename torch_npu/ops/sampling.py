"""Sampling operators: npu_top_k_top_p (aclnnApplyTopKTopP), npu_sim_exponential_ (the exponential draws of
Gumbel-style sampling) and npu_random_choice_with_mask."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dtype_support import FLOATS
from torch_npu.ops.registration import npu_op
from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = []


def _checked_logits(logits, p, k):
    """The checks that need no values (a traced call has none): logits [B, V], p and k [B]."""
    op = "npu_top_k_top_p"
    check(logits.dim() == 2, op, f"logits must be 2-D [B, V], got {logits.dim()}-D")
    batch = logits.shape[0]
    for name, value in (("p", p), ("k", k)):
        check(
            value is None or tuple(value.shape) == (batch,),
            op,
            f"{name} must be [B] with B={batch}, got {None if value is None else tuple(value.shape)}",
        )
    return logits


@npu_op(
    "npu_top_k_top_p(Tensor logits, Tensor? p=None, Tensor? k=None) -> Tensor",
    dtypes={"logits": FLOATS},
    api="aclnnApplyTopKTopP",
    fake=lambda logits, p=None, k=None: torch.empty_like(_checked_logits(logits, p, k)),
)
def npu_top_k_top_p(logits, p=None, k=None):
    """Top-k then top-p filtering of [B, V] logits, per row b (aclnnApplyTopKTopP): sort ascending (stable); drop
    the values below the k[b]-th largest; softmax what is left and accumulate from the smallest probability; drop
    the positions whose running sum is <= 1 - p[b], always keeping the largest. Dropped logits become -inf, in
    the original order."""
    op = "npu_top_k_top_p"
    batch, vocab = _checked_logits(logits, p, k).shape
    if k is not None:
        check(bool(((k >= 1) & (k <= vocab)).all()), op, f"k must be in [1, {vocab}]")
    values, order = torch.sort(logits, dim=-1, stable=True)
    values = values.float()
    if k is not None:
        threshold = values.gather(-1, (vocab - k.long()).unsqueeze(-1))
        values = values.masked_fill(values < threshold, float("-inf"))
    if p is not None:
        cumulative = values.softmax(dim=-1).cumsum(dim=-1)
        drop = cumulative <= 1 - p.float().unsqueeze(-1)
        drop[:, -1] = False
        values = values.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(-1, order, values.to(logits.dtype))


@npu_op(
    "npu_sim_exponential_(Tensor(a!) self, float lambd=1, *, Generator? generator=None) -> Tensor(a!)",
    dtypes={"self": FLOATS},
    api="aclnnSimThreadExponential",
)
def npu_sim_exponential_(x, lambd=1.0, *, generator=None):
    """Fills self with exponential samples -ln(1 - u) / lambd, u ~ U(0, 1], drawn from the npu generator (the
    default one, or `generator`); lambd = inf gives zeros. The numbers follow vnpu's npu generator, not the
    card's Philox stream."""
    if not lambd > 0.0:
        raise RuntimeError(
            f"npu_sim_exponential_ expects lambd > 0.0, but found lambd={lambd}" + ops_error(ErrCode.PARAM)
        )
    if lambd == float("inf"):
        return x.zero_()
    return x.exponential_(lambd, generator=generator)


def _random_choice_fake(x, count=256, seed=0, seed2=0):
    rows = count if count > 0 else torch.library.get_ctx().new_dynamic_size()
    return x.new_empty(rows, x.dim(), dtype=torch.int32), x.new_empty(rows, dtype=torch.bool)


@npu_op(
    "npu_random_choice_with_mask(Tensor x, int count=256, int seed=0, int seed2=0) -> (Tensor, Tensor)",
    fake=_random_choice_fake,
    dtypes={"x": (torch.bool,)},
    api="RandomChoiceWithMask",
)
def npu_random_choice_with_mask(x, count=256, seed=0, seed2=0):
    """The indices of x's true elements in random order: y int32 [count, x.dim()] and mask bool [count] (False
    on the zero rows that pad when fewer than count are true); count=0 returns them all. With seed == seed2 ==
    0 the order comes from the npu generator, otherwise from the seeds ((seed2 << 32) + seed), reproducibly."""
    op = "npu_random_choice_with_mask"
    check(1 <= x.dim() <= 5, op, f"x must have 1 to 5 dimensions, got {x.dim()}")
    check(count >= 0 and seed >= 0 and seed2 >= 0, op, "count, seed and seed2 must be non-negative")
    found = torch.nonzero(x).to(torch.int32)
    generator = None
    if seed or seed2:
        generator = torch.Generator(device=x.device)
        generator.manual_seed((seed2 << 32) + seed)
    chosen = found[torch.randperm(found.shape[0], generator=generator, device=x.device)]
    rows = count if count > 0 else chosen.shape[0]
    y = chosen.new_zeros(rows, x.dim())
    taken = min(rows, chosen.shape[0])
    y[:taken] = chosen[:taken]
    mask = torch.arange(rows, device=x.device) < taken
    return y, mask
