"""op-plugin's ATB expert selection (_npu_group_topk, torch_npu.atb.npu_fused_add_topk_div) against references
written here token by token, their fake kernels and compiled graphs, and their argument errors."""

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu


def _best_groups(scores, group_num, kept, n):
    """The indices of one token's `kept` best groups: a group scores the sum of its n best (ties: lower group)."""
    sums = [sorted(group.tolist(), reverse=True)[:n] for group in scores.float().view(group_num, -1)]
    ranked = sorted(range(group_num), key=lambda g: (-sum(sums[g]), g))
    return set(ranked[:kept])


def _group_topk_reference(scores, k, group_num, n):
    out = scores.clone()
    width = scores.shape[1] // group_num
    for t in range(scores.shape[0]):
        keep = _best_groups(scores[t], group_num, k, n)
        for g in set(range(group_num)) - keep:
            out[t, g * width : (g + 1) * width] = 0
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("experts", "group_num", "k", "n"), [(16, 4, 2, 2), (12, 3, 1, 4), (8, 8, 3, 1), (6, 2, 0, 1)])
def test_group_topk_zeroes_the_experts_outside_each_token_s_best_groups(dtype, experts, group_num, k, n):
    scores = torch.empty(5, experts).uniform_(-2, 2).to(dtype)
    scores[0, :] = 1  # equal groups: the lower ones are kept
    got = scores.npu()
    assert torch_npu._npu_group_topk(got, k=k, group_num=group_num, n=n) is None
    assert torch.equal(got.cpu(), _group_topk_reference(scores, k, group_num, n))


def _fused_reference(x, add_num, group_num, group_topk, n, k, is_norm, scale, mapping=None):
    weights, chosen = [], []
    sig = torch.sigmoid(x.float())
    biased = sig + add_num.float()
    width = x.shape[1] // group_num
    for t in range(x.shape[0]):
        keep = _best_groups(biased[t], group_num, group_topk, n)
        ranked_values = [biased[t, e].item() if e // width in keep else 0.0 for e in range(x.shape[1])]
        order = sorted(range(x.shape[1]), key=lambda e: (-ranked_values[e], e))
        picked = order[:k]
        w = torch.stack([sig[t, e] for e in picked])
        if is_norm:
            w = w / w.sum() * scale
        if mapping is not None:
            mapping_num, table = mapping
            reference = order[group_topk * width - 1] + 7
            draw = torch.tensor(100000007 % reference, dtype=torch.float32) / torch.tensor(
                reference, dtype=torch.float32
            )
            picked = [int(table[e, int(torch.floor(mapping_num[e].float() * draw))]) for e in picked]
        weights.append(w)
        chosen.append(torch.tensor(picked, dtype=torch.int32))
    return torch.stack(weights), torch.stack(chosen)


_OPTIONS = dict(group_num=8, group_topk=4, n=2, k=8, is_norm=True, scale=1.0)


def test_fused_add_topk_div_picks_weights_and_experts_as_the_reference():
    x, add_num = torch.rand(6, 64).half() * 9 + 1, torch.rand(64).half() * 9 + 1
    check_op(
        lambda x, a: torch_npu.atb.npu_fused_add_topk_div(x, a, activation_type="activation_sigmoid", **_OPTIONS),
        (x, add_num),
        lambda x, a: _fused_reference(x, a, **_OPTIONS),
        atol=1e-6,
        rtol=1e-6,
    )


def test_unnormalised_weights_are_the_sigmoids_and_scale_applies_only_when_normalised():
    x, add_num = torch.randn(4, 32).half(), torch.randn(32).half()
    options = dict(group_num=4, group_topk=2, n=1, k=3, scale=2.5)
    for is_norm in (True, False):
        got = torch_npu.atb.npu_fused_add_topk_div(x.npu(), add_num.npu(), is_norm=is_norm, **options)
        want = _fused_reference(x, add_num, is_norm=is_norm, **options)
        torch.testing.assert_close(got[0].cpu(), want[0], atol=1e-6, rtol=1e-6)
        assert torch.equal(got[1].cpu(), want[1])


def test_expert_mapping_replaces_each_expert_with_the_replica_the_card_draws_and_the_out_form_writes_it():
    x, add_num = torch.rand(5, 64).half() * 9 + 1, torch.rand(64).half() * 9 + 1
    mapping_num = torch.randint(1, 4, (64,), dtype=torch.int32)
    table = torch.randint(0, 64, (64, 3), dtype=torch.int32)
    want = _fused_reference(x, add_num, mapping=(mapping_num, table), **_OPTIONS)
    y, indices = torch.empty(5, 8, device="npu"), torch.empty(5, 8, dtype=torch.int32, device="npu")
    returned = torch_npu.atb.npu_fused_add_topk_div(
        x.npu(), add_num.npu(), mapping_num=mapping_num.npu(), mapping_table=table.npu(),
        enable_expert_mapping=True, y=y, indices=indices, **_OPTIONS,
    )  # fmt: skip
    assert returned[0] is y and returned[1] is indices
    torch.testing.assert_close(y.cpu(), want[0], atol=1e-6, rtol=1e-6)
    assert torch.equal(indices.cpu(), want[1])


def test_the_atb_operators_live_where_torch_npu_puts_them():
    assert torch_npu.atb.npu_fused_add_topk_div is torch.ops.atb.npu_fused_add_topk_div
    assert "npu_fused_add_topk_div" in torch_npu.atb.__all__
    assert not hasattr(torch_npu, "npu_fused_add_topk_div")
    assert torch_npu._npu_group_topk is torch.ops.atb._npu_group_topk
    assert not hasattr(torch_npu.atb, "_npu_group_topk")


def test_bad_arguments_name_what_is_wrong():
    scores, add_num = torch.zeros(2, 12, dtype=torch.float16, device="npu"), torch.zeros(12, device="npu")
    table = torch.zeros(12, 2, dtype=torch.int32, device="npu")
    cases = [
        (
            lambda: torch_npu._npu_group_topk(scores, k=1, group_num=5),
            "_npu_group_topk: group_num=5 must divide the 12 experts",
        ),  # fmt: skip
        (
            lambda: torch_npu._npu_group_topk(scores, k=4, group_num=3),
            "_npu_group_topk: k=4 must be in [0, group_num=3]",
        ),  # fmt: skip
        (
            lambda: torch_npu._npu_group_topk(scores, k=1, group_num=3, n=5),
            "_npu_group_topk: n=5 must be in [1, 4] (experts per group)",
        ),  # fmt: skip
        (
            lambda: torch_npu._npu_group_topk(scores[0], k=1),
            "_npu_group_topk: self must be [tokens, experts], got 1-D",
        ),  # fmt: skip
        (
            lambda: torch_npu.atb.npu_fused_add_topk_div(scores, add_num, activation_type="activation_relu"),
            "npu_fused_add_topk_div: Unsupported activation_type value: 'activation_relu'",
        ),
        (
            lambda: torch_npu.atb.npu_fused_add_topk_div(scores, add_num[:4]),
            "npu_fused_add_topk_div: add_num must hold one value per expert (12), got 4",
        ),
        (
            lambda: torch_npu.atb.npu_fused_add_topk_div(scores, add_num, k=13),
            "npu_fused_add_topk_div: k=13 must be in [1, 12]",
        ),
        (
            lambda: torch_npu.atb.npu_fused_add_topk_div(scores, add_num, enable_expert_mapping=True),
            "npu_fused_add_topk_div: enable_expert_mapping needs mapping_num and mapping_table",
        ),
        (
            lambda: torch_npu.atb.npu_fused_add_topk_div(scores[0], add_num),
            "npu_fused_add_topk_div: x must be [tokens, experts], got 1-D",
        ),
        (
            lambda: torch_npu.atb.npu_fused_add_topk_div(
                scores, add_num, mapping_num=table[0], mapping_table=table[:3], enable_expert_mapping=True
            ),  # fmt: skip
            "npu_fused_add_topk_div: mapping_table must be [12, replicas], got (3, 2)",
        ),
        (
            lambda: torch_npu.atb.npu_fused_add_topk_div(
                scores, add_num, group_topk=0, mapping_num=table[:, 0], mapping_table=table, enable_expert_mapping=True
            ),  # fmt: skip
            "npu_fused_add_topk_div: enable_expert_mapping needs group_topk >= 1",
        ),
    ]
    for call, message in cases:
        raises_operator_error(call, message)
