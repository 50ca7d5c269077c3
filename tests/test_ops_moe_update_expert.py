"""npu_moe_update_expert against the element-by-element mapping and pruning of torch_npu's own test, for both
balance modes, every rank of a group, int32 and int64 expert ids."""

import math

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu

BS, K, EXPERTS, F, WORLD = 32, 8, 64, 5, 8


def table(g):
    rows = []
    for _ in range(EXPERTS):
        count = int(torch.randint(1, F, (1,), generator=g))
        ranks = torch.randperm(WORLD, generator=g)[:count].tolist()
        rows.append([count, *ranks, *[0] * (F - 1 - count)])
    return torch.tensor(rows, dtype=torch.int32)


def reference(expert_ids, eplb, rank, mode, scales=None, threshold=None, active=None):
    ids = torch.zeros(BS, K, dtype=expert_ids.dtype)
    mask = torch.ones(BS, K, dtype=torch.bool)
    for i in range(BS):
        row_sum = torch.tensor(0.0)
        if scales is not None:
            for k in range(K):
                row_sum = row_sum + scales[i, k].float()
        for k in range(K):
            expert = int(expert_ids[i, k])
            count = int(eplb[expert, 0])
            replica = rank // math.ceil(WORLD / count) if mode == 0 else i % count
            ids[i, k] = eplb[expert, replica + 1]
            if scales is not None:
                pruned = bool(scales[i, k].float() < threshold.reshape(-1)[k] * row_sum)
                mask[i, k] = (active is None or bool(active[i])) and not pruned
    return ids, mask


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_mapping_and_pruning_on_every_rank(mode, dtype):
    g = torch.Generator().manual_seed(mode * 10 + (dtype == torch.int64))
    eplb = table(g)
    expert_ids = torch.randint(0, EXPERTS, (BS, K), generator=g).to(dtype)
    scales = torch.sort(torch.rand(BS, K, generator=g) * 0.25, dim=1, descending=True).values
    threshold = torch.rand(1, K, generator=g) * 0.15
    active = torch.arange(BS) < int(torch.randint(0, BS + 1, (1,), generator=g))
    for rank in range(WORLD):
        ids, mask = torch_npu.npu_moe_update_expert(
            expert_ids.npu(),
            eplb.npu(),
            expert_scales=scales.npu(),
            pruning_threshold=threshold.npu(),
            active_mask=active.npu(),
            local_rank_id=rank,
            world_size=WORLD,
            balance_mode=mode,
        )
        want_ids, want_mask = reference(expert_ids, eplb, rank, mode, scales, threshold, active)
        assert ids.dtype == dtype and torch.equal(ids.cpu(), want_ids)
        assert torch.equal(mask.cpu(), want_mask)


def test_without_pruning_inputs_every_expert_is_kept():
    g = torch.Generator().manual_seed(7)
    eplb, expert_ids = table(g), torch.randint(0, EXPERTS, (BS, K), generator=g, dtype=torch.int32)
    ids, mask = torch_npu.npu_moe_update_expert(expert_ids.npu(), eplb.npu(), balance_mode=1)
    assert torch.equal(ids.cpu(), reference(expert_ids, eplb, 0, 1)[0]) and bool(mask.all())


def test_half_precision_scales_and_a_1d_threshold():
    g = torch.Generator().manual_seed(8)
    eplb, expert_ids = table(g), torch.randint(0, EXPERTS, (BS, K), generator=g, dtype=torch.int32)
    scales = torch.sort(torch.rand(BS, K, generator=g), dim=1, descending=True).values.half()
    threshold = torch.rand(K, generator=g) * 0.2
    _, mask = torch_npu.npu_moe_update_expert(
        expert_ids.npu(), eplb.npu(), expert_scales=scales.npu(), pruning_threshold=threshold.npu(), balance_mode=1
    )
    assert torch.equal(mask.cpu(), reference(expert_ids, eplb, 0, 1, scales, threshold)[1])


def _args(**change):
    g = torch.Generator().manual_seed(9)
    args = {
        "expert_ids": torch.randint(0, EXPERTS, (BS, K), generator=g, dtype=torch.int32),
        "eplb_table": table(g),
        "local_rank_id": 0,
        "world_size": WORLD,
        "balance_mode": 0,
    }
    args.update(change)
    return {k: v.npu() if isinstance(v, torch.Tensor) else v for k, v in args.items()}


BAD_INPUTS = [
    ({"balance_mode": 2}, r"balance_mode must be 0 \(by rank\) or 1 \(by token\), got 2"),
    ({"world_size": 1}, r"balance_mode 0 needs world_size in \[2, 768\], got 1"),
    ({"local_rank_id": 8}, r"balance_mode 0 needs local_rank_id in \[0, 8\), got 8"),
    (
        {"expert_ids": torch.full((BS, K), EXPERTS, dtype=torch.int32)},
        r"expert_ids must lie in \[0, moe_expert_num=64\)",
    ),
    ({"eplb_table": torch.zeros(EXPERTS, F, dtype=torch.int32)}, r"eplb_table's column 0 \(replica counts\)"),
    ({"eplb_table": torch.ones(EXPERTS, F)}, "eplb_table must be a 2-D int32 tensor"),
    ({"expert_scales": torch.rand(BS, K)}, "expert_scales and pruning_threshold must be given together"),
    ({"active_mask": torch.ones(BS, dtype=torch.bool)}, "active_mask needs expert_scales and pruning_threshold"),
    (
        {"expert_scales": torch.rand(BS, K), "pruning_threshold": torch.rand(K + 1)},
        r"pruning_threshold must be float32 \[8\] or \[1, 8\]",
    ),
]


@pytest.mark.parametrize("change, message", BAD_INPUTS)
def test_bad_inputs(change, message):
    args = _args(**change)
    with pytest.raises(RuntimeError, match=f"^npu_moe_update_expert: {message}"):
        torch_npu.npu_moe_update_expert(args.pop("expert_ids"), args.pop("eplb_table"), **args)


def test_fake_kernel_and_compiled_graph_agree_with_eager():
    g = torch.Generator().manual_seed(10)
    eplb, expert_ids = table(g), torch.randint(0, EXPERTS, (BS, K), generator=g, dtype=torch.int64)
    scales, threshold = torch.rand(BS, K, generator=g), torch.rand(K, generator=g) * 0.2
    check_op(
        lambda e, t, s, th, **kw: torch_npu.npu_moe_update_expert(e, t, expert_scales=s, pruning_threshold=th, **kw),
        (expert_ids, eplb, scales, threshold),
        lambda e, t, s, th, **kw: reference(e, t, 3, 0, s, th),
        {"local_rank_id": 3, "world_size": WORLD, "balance_mode": 0},
        atol=0,
        rtol=0,
    )


L = torch.long


def n(*shape, **kwargs):
    return torch.zeros(*shape, **kwargs).npu()


EXACT_ERRORS = [
    (
        lambda: torch_npu.npu_moe_update_expert(
            n(4, dtype=torch.int32), torch.ones(8, 3, dtype=torch.int32).npu(), balance_mode=1
        ),
        "npu_moe_update_expert: expert_ids must be a 2-D int32 or int64 tensor [BS, K], got (4,) torch.int32",
    ),
    (
        lambda: torch_npu.npu_moe_update_expert(
            n(4, 2, dtype=torch.int32),
            torch.ones(8, 3, dtype=torch.int32).npu(),
            expert_scales=n(4, 3),
            pruning_threshold=n(2),
            balance_mode=1,
        ),
        "npu_moe_update_expert: expert_scales must be a float tensor [4, 2], got (4, 3) torch.float32",
    ),
    (
        lambda: torch_npu.npu_moe_update_expert(
            n(4, 2, dtype=torch.int32),
            torch.ones(8, 3, dtype=torch.int32).npu(),
            expert_scales=n(4, 2),
            pruning_threshold=n(2),
            active_mask=n(4),
            balance_mode=1,
        ),
        "npu_moe_update_expert: active_mask must be a bool tensor [4], got (4,) torch.float32",
    ),
]


@pytest.mark.parametrize("call, message", EXACT_ERRORS)
def test_bad_inputs_give_torch_npus_error_text(call, message):
    raises_operator_error(call, message)
