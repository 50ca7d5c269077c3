"""npu_moe_update_expert: map each token's top-k logical experts to the physical ranks that hold a replica
(redundant-expert EPLB), and prune experts whose weight is too small (MoeUpdateExpert).

eplb_table [experts, F] int32: column 0 is a logical expert's replica count c (>= 1), columns 1..c the ranks.
For token i and its expert e:
    balance_mode 0 (by rank): replica = local_rank_id // ceil(world_size / c)
    balance_mode 1 (by token): replica = i % c
    balanced_expert_ids[i, k] = eplb_table[e, 1 + replica]            (expert_ids' dtype)
Pruning (expert_scales and pruning_threshold given): balanced_active_mask[i, k] = active_mask[i] and not
(expert_scales[i, k] < pruning_threshold[k] * sum_k expert_scales[i, :]), in float32, the row summed in order.
Without them nothing is pruned and the mask is True for every expert of every token.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_moe_update_expert"


def _check_table(expert_ids, eplb_table, local_rank_id, world_size, balance_mode):
    check(balance_mode in (0, 1), _OP, f"balance_mode must be 0 (by rank) or 1 (by token), got {balance_mode}")
    check(
        expert_ids.dim() == 2 and expert_ids.dtype in (torch.int32, torch.int64),
        _OP,
        f"expert_ids must be a 2-D int32 or int64 tensor [BS, K], got {tuple(expert_ids.shape)} {expert_ids.dtype}",
    )
    check(
        eplb_table.dim() == 2 and eplb_table.dtype == torch.int32 and eplb_table.shape[1] >= 2,
        _OP,
        f"eplb_table must be a 2-D int32 tensor [moe_expert_num, F >= 2], got {tuple(eplb_table.shape)} "
        f"{eplb_table.dtype}",
    )
    if balance_mode == 0:
        check(2 <= world_size <= 768, _OP, f"balance_mode 0 needs world_size in [2, 768], got {world_size}")
        check(
            0 <= local_rank_id < world_size,
            _OP,
            f"balance_mode 0 needs local_rank_id in [0, {world_size}), got {local_rank_id}",
        )
    experts, width = eplb_table.shape
    counts = eplb_table[:, 0]
    check(
        bool(((counts >= 1) & (counts <= width - 1)).all()),
        _OP,
        f"eplb_table's column 0 (replica counts) must lie in [1, {width - 1}]",
    )
    check(
        bool(((expert_ids >= 0) & (expert_ids < experts)).all()),
        _OP,
        f"expert_ids must lie in [0, moe_expert_num={experts})",
    )


def _check_pruning(expert_ids, expert_scales, pruning_threshold, active_mask):
    check(
        (expert_scales is None) == (pruning_threshold is None),
        _OP,
        "expert_scales and pruning_threshold must be given together",
    )
    check(
        active_mask is None or expert_scales is not None,
        _OP,
        "active_mask needs expert_scales and pruning_threshold",
    )
    if expert_scales is None:
        return
    bs, k = expert_ids.shape
    check(
        tuple(expert_scales.shape) == (bs, k) and expert_scales.is_floating_point(),
        _OP,
        f"expert_scales must be a float tensor [{bs}, {k}], got {tuple(expert_scales.shape)} {expert_scales.dtype}",
    )
    check(
        pruning_threshold.dtype == torch.float32 and tuple(pruning_threshold.shape) in ((k,), (1, k)),
        _OP,
        f"pruning_threshold must be float32 [{k}] or [1, {k}], got {tuple(pruning_threshold.shape)} "
        f"{pruning_threshold.dtype}",
    )
    if active_mask is not None:
        check(
            active_mask.dtype == torch.bool and tuple(active_mask.shape) == (bs,),
            _OP,
            f"active_mask must be a bool tensor [{bs}], got {tuple(active_mask.shape)} {active_mask.dtype}",
        )


def _fake(expert_ids, eplb_table, **kwargs):
    return torch.empty_like(expert_ids), expert_ids.new_empty(expert_ids.shape, dtype=torch.bool)


@npu_op(
    "npu_moe_update_expert(Tensor expert_ids, Tensor eplb_table, *, Tensor? expert_scales=None, "
    "Tensor? pruning_threshold=None, Tensor? active_mask=None, int local_rank_id=-1, int world_size=-1, "
    "int balance_mode=0) -> (Tensor, Tensor)",
    fake=_fake,
    api="aclnnMoeUpdateExpert",
)
def npu_moe_update_expert(
    expert_ids,
    eplb_table,
    *,
    expert_scales=None,
    pruning_threshold=None,
    active_mask=None,
    local_rank_id=-1,
    world_size=-1,
    balance_mode=0,
):
    _check_table(expert_ids, eplb_table, local_rank_id, world_size, balance_mode)
    _check_pruning(expert_ids, expert_scales, pruning_threshold, active_mask)
    experts = expert_ids.long()
    counts = eplb_table[:, 0].long()[experts]
    if balance_mode == 0:
        replica = local_rank_id // torch.div(world_size + counts - 1, counts, rounding_mode="floor")
    else:
        tokens = torch.arange(expert_ids.shape[0], device=expert_ids.device).view(-1, 1)
        replica = tokens % counts
    balanced = eplb_table.long()[experts, 1 + replica].to(expert_ids.dtype)
    if expert_scales is None:
        return balanced, torch.ones_like(expert_ids, dtype=torch.bool)
    scales = expert_scales.float()
    row_sum = scales.cumsum(dim=1)[:, -1:]  # summed in order, as the kernel walks the row
    kept = ~(scales < pruning_threshold.reshape(1, -1) * row_sum)
    if active_mask is not None:
        kept = kept & active_mask.view(-1, 1)
    return balanced, kept
