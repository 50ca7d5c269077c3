"""npu_moe_re_routing: after the MoE all-to-all, the received tokens (grouped by source rank, then by expert, as
expert_token_num_per_rank [N, E] counts them) reordered by expert, then by source rank.

Returns (permute_tokens [A, H], permute_per_token_scales [A] float32 (op-plugin allocates it without per_token_scales
too; the card leaves it unwritten, here zeros),
permute_token_idx [A] int32 with permute_tokens[i] = tokens[permute_token_idx[i]] (idx_type 0, gather
indices), expert_token_num [E]: tokens per expert (expert_token_num_type 1, counts), in the counts' dtype).
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_moe_re_routing"


def _check(tokens, counts, per_token_scales, expert_token_num_type, idx_type):
    check(tokens.dim() == 2, _OP, f"tokens must be [A, H], got {tuple(tokens.shape)}")
    check(counts.dim() == 2 and counts.dtype in (torch.int32, torch.int64), _OP,
          "expert_token_num_per_rank must be a 2-D int32 / int64 tensor [N, E]")  # fmt: skip
    check(
        expert_token_num_type == 1, _OP, f"expert_token_num_type only supports 1 (count), got {expert_token_num_type}"
    )
    check(idx_type == 0, _OP, f"idx_type only supports 0 (gather indices), got {idx_type}")
    check(per_token_scales is None or per_token_scales.shape == (tokens.shape[0],), _OP,
          f"per_token_scales must be [A={tokens.shape[0]}]")  # fmt: skip


def _fake(tokens, expert_token_num_per_rank, *, per_token_scales=None, expert_token_num_type=1, idx_type=0,
          tokens_dtype=None):  # fmt: skip
    _check(tokens, expert_token_num_per_rank, per_token_scales, expert_token_num_type, idx_type)
    a = tokens.shape[0]
    scales = tokens.new_empty(a, dtype=torch.float32)
    experts = expert_token_num_per_rank.shape[1]
    return (torch.empty_like(tokens), scales, tokens.new_empty(a, dtype=torch.int32),
            expert_token_num_per_rank.new_empty(experts))  # fmt: skip


@npu_op(
    "npu_moe_re_routing(Tensor tokens, Tensor expert_token_num_per_rank, *, Tensor? per_token_scales=None, "
    "int expert_token_num_type=1, int idx_type=0, int? tokens_dtype=None) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=_fake,
)
def npu_moe_re_routing(
    tokens, expert_token_num_per_rank, *, per_token_scales=None, expert_token_num_type=1, idx_type=0,
    tokens_dtype=None,
):  # fmt: skip
    """Tokens reordered expert-major (see the module doc)."""
    _check(tokens, expert_token_num_per_rank, per_token_scales, expert_token_num_type, idx_type)
    counts = expert_token_num_per_rank.long()
    check(bool((counts >= 0).all()) and int(counts.sum()) == tokens.shape[0], _OP,
          f"expert_token_num_per_rank must be non-negative and sum to A={tokens.shape[0]}, got {int(counts.sum())}")  # fmt: skip
    starts = (counts.flatten().cumsum(0) - counts.flatten()).view(counts.shape)  # [N, E]: where each block begins
    index = torch.cat([
        torch.arange(int(starts[r, e]), int(starts[r, e] + counts[r, e]), device=tokens.device)
        for e in range(counts.shape[1]) for r in range(counts.shape[0])
    ] or [torch.empty(0, dtype=torch.long, device=tokens.device)])  # fmt: skip
    scales = (per_token_scales.index_select(0, index).float() if per_token_scales is not None
              else tokens.new_zeros(tokens.shape[0], dtype=torch.float32))  # fmt: skip
    expert_counts = expert_token_num_per_rank.sum(0).to(expert_token_num_per_rank.dtype)
    return tokens.index_select(0, index), scales, index.to(torch.int32), expert_counts
