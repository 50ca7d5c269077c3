"""npu_moe_distribute_dispatch / _combine: what vnpu does not compute is refused before any communication, with
the argument named (the multi-rank behaviour is in test_distributed.py)."""

import torch

import torch_npu
from tests.error_cases import raises_operator_error

X, IDS = torch.randn(2, 8).npu(), torch.zeros(2, 1, dtype=torch.int32).npu()


def combine(op, ep_world_size, moe_expert_num, **kwargs):
    """op's call on two tokens of one choice each, rank 0 of ep_world_size, over a group that does not exist."""
    flat = IDS.reshape(-1)
    return lambda: op(X, IDS, flat, flat, torch.ones(2, 1).npu(), "hccl_0", ep_world_size, 0, moe_expert_num, **kwargs)


def test_refusals_name_the_argument():
    raises_operator_error(
        combine(torch_npu.npu_moe_distribute_combine, 2, 4, activation_scale=torch.ones(2).npu()),
        "npu_moe_distribute_combine: activation_scale / weight_scale (int32 expand_x) is not computed by vnpu",
    )


def test_the_domain_attributes_are_checked_before_any_communication():
    cases = [
        (dict(tp_world_size=3), "tp_world_size must be 0, 1 (no TP domain) or 2, got 3"),
        (dict(tp_world_size=2), "the TP domain needs one expert per MoE rank, got 2 (moe_expert_num 4 on 2 MoE ranks)"),
        (dict(shared_expert_rank_num=2), "shared_expert_rank_num must lie in [0, ep_world_size=2), got 2"),
        (
            dict(shared_expert_rank_num=1, shared_expert_num=2),
            "shared_expert_num must be 1 with shared-expert ranks, got 2",
        ),
        (dict(expert_shard_type=1), "expert_shard_type must be 0 (shared-expert ranks first), got 1"),
    ]
    for kwargs, message in cases:
        raises_operator_error(
            lambda kwargs=kwargs: torch_npu.npu_moe_distribute_dispatch(X, IDS, "hccl_0", 2, 0, 4, **kwargs),
            f"npu_moe_distribute_dispatch: {message}",
        )
    raises_operator_error(
        lambda: torch_npu.npu_moe_distribute_dispatch_v2(X, IDS, "hccl_0", 4, 0, 4, shared_expert_rank_num=3),
        "npu_moe_distribute_dispatch_v2: ep_world_size (4) must be a multiple of shared_expert_rank_num (3)",
    )
    raises_operator_error(  # the v2 family's rule: up to 4 shared experts, each on S / shared_expert_num ranks
        lambda: torch_npu.npu_moe_distribute_dispatch_v2(
            X, IDS, "hccl_0", 4, 0, 4, shared_expert_rank_num=2, shared_expert_num=3
        ),
        "npu_moe_distribute_dispatch_v2: shared_expert_num must lie in [1, 4] and divide shared_expert_rank_num (2), got 3",
    )
    raises_operator_error(
        combine(torch_npu.npu_moe_distribute_combine, 4, 4, shared_expert_rank_num=1),
        "npu_moe_distribute_combine: moe_expert_num (4) must be a positive multiple of ep_world_size - "
        "shared_expert_rank_num (3)",
    )


def test_the_setup_and_teardown_operators_refuse_shared_expert_ranks_as_cann_does():
    raises_operator_error(
        lambda: torch_npu.npu_moe_distribute_dispatch_setup(X, IDS, "hccl_0", 2, 0, 4, shared_expert_rank_num=1),
        "npu_moe_distribute_dispatch_setup: shared_expert_rank_num must be 0: the setup / teardown operators serve "
        "no shared-expert ranks (CANN's release does not either), got 1",
    )


def test_combine_takes_shared_expert_x_only_without_shared_expert_ranks():
    raises_operator_error(
        combine(torch_npu.npu_moe_distribute_combine_v2, 2, 1, shared_expert_rank_num=1, shared_expert_x=X),
        "npu_moe_distribute_combine_v2: shared_expert_x is taken only without shared-expert ranks "
        "(shared_expert_rank_num 0): those ranks compute the shared expert",
    )


def test_x_active_mask_is_checked_and_taken_by_the_v2_operators_only():
    dispatch_v2 = torch_npu.npu_moe_distribute_dispatch_v2
    cases = [
        (
            torch.tensor([True, False, True]),
            "x_active_mask must be a bool tensor of shape (BS,) or (BS, K) = (2,) or (2, 1), got torch.bool (3,)",
        ),  # fmt: skip
        (torch.tensor([False, True]), "x_active_mask of shape (BS,) must hold its True values before its False values"),
    ]
    for mask, message in cases:
        raises_operator_error(
            lambda mask=mask: dispatch_v2(X, IDS, "hccl_0", 2, 0, 4, x_active_mask=mask.npu()),
            f"npu_moe_distribute_dispatch_v2: {message}",
        )
    raises_operator_error(
        combine(torch_npu.npu_moe_distribute_combine, 2, 4, x_active_mask=torch.ones(2, dtype=torch.bool).npu()),
        "npu_moe_distribute_combine: x_active_mask (the v2 operators take it) is not computed by vnpu",
    )


def test_the_tp_domain_needs_its_own_communicator():
    raises_operator_error(
        lambda: torch_npu.npu_moe_distribute_dispatch(X, IDS, "hccl_0", 2, 0, 2, tp_world_size=2, group_tp="hccl_0"),
        "npu_moe_distribute_dispatch: group_tp must name another communicator than group_ep, both are 'hccl_0'",
    )
