"""op-plugin's ATB operators that pick each token's experts the DeepSeek-V3 way (vllm-ascend's MoE routing):

_npu_group_topk(scores, k, group_num, n) keeps, in place, the k best of group_num expert groups per token (a
group's score is the sum of its n best scores, in float32; ties go to the lower group) and zeroes the others.

npu_fused_add_topk_div (torch_npu.atb.npu_fused_add_topk_div) fuses the whole selection: s = sigmoid(x) in
float32, the groups ranked on s + add_num, the k best experts of the kept groups (a stable descending sort, the
dropped groups counting as 0), their weights s gathered and, with is_norm, divided by their sum and times scale
(float32 weights, int32 expert ids). With enable_expert_mapping each chosen expert becomes one of its replicas:
mapping_table[e, floor(mapping_num[e] * r)] with r = (100000007 mod (i + 7)) / (i + 7) for the token's
(group_topk * experts per group)-th best expert i, as the card's kernel draws it."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

# The card's replica draw: a prime modulo the id of a reference expert, offset so that it is never 0 or 1.
_MAPPING_PRIME, _MAPPING_OFFSET = 100000007, 7
_ACTIVATIONS = ("activation_sigmoid",)


def _check_groups(experts, group_num, kept, n, op, kept_name):
    check(group_num > 0 and experts % group_num == 0, op, f"group_num={group_num} must divide the {experts} experts")
    check(0 <= kept <= group_num, op, f"{kept_name}={kept} must be in [0, group_num={group_num}]")
    check(1 <= n <= experts // group_num, op, f"n={n} must be in [1, {experts // group_num}] (experts per group)")


def _kept_experts(scores, group_num, kept, n):
    """bool [tokens, experts]: the experts of each token's `kept` best groups (float32 scores)."""
    tokens, experts = scores.shape
    group_score = scores.view(tokens, group_num, -1).topk(n, dim=-1).values.sum(-1)
    dropped = group_score.argsort(dim=-1, descending=True, stable=True)[:, kept:]
    keep = torch.ones_like(group_score, dtype=torch.bool).scatter_(1, dropped, False)
    return keep.repeat_interleave(experts // group_num, dim=1)


@npu_op("atb::_npu_group_topk(Tensor self, int k=0, int group_num=1, int n=1) -> ()")
def _npu_group_topk(self, k=0, group_num=1, n=1):
    """Zeroes, in place, every expert outside each token's k best groups of `self` [tokens, experts]."""
    op = "_npu_group_topk"
    check(self.dim() == 2, op, f"self must be [tokens, experts], got {self.dim()}-D")
    _check_groups(self.shape[1], group_num, k, n, op, "k")
    self.masked_fill_(~_kept_experts(self.float(), group_num, k, n), 0)


def _mapped(sorted_experts, chosen, mapping_num, mapping_table, reference_rank):
    reference = sorted_experts[:, reference_rank : reference_rank + 1].int() + _MAPPING_OFFSET
    draw = torch.remainder(_MAPPING_PRIME, reference) / reference.float()  # [tokens, 1]
    replica = torch.floor(mapping_num.float() * draw).int()  # [tokens, experts]
    return mapping_table[chosen, replica.gather(1, chosen)].int()


def _select(
    x, add_num, *, mapping_num=None, mapping_table=None, activation_type=None, group_num=1, group_topk=1, n=1, k=1,
    is_norm=True, scale=1.0, enable_expert_mapping=False,
):  # fmt: skip
    op = "npu_fused_add_topk_div"
    mode = "activation_sigmoid" if activation_type is None else activation_type
    check(mode in _ACTIVATIONS, op, f"Unsupported activation_type value: '{mode}'")
    check(x.dim() == 2, op, f"x must be [tokens, experts], got {x.dim()}-D")
    experts = x.shape[1]
    check(add_num.numel() == experts, op, f"add_num must hold one value per expert ({experts}), got {add_num.numel()}")
    _check_groups(experts, group_num, group_topk, n, op, "group_topk")
    check(1 <= k <= experts, op, f"k={k} must be in [1, {experts}]")
    activated = torch.sigmoid(x.float())
    biased = activated + add_num.reshape(-1).float()
    ranked = biased.masked_fill(~_kept_experts(biased, group_num, group_topk, n), 0)
    sorted_experts = ranked.argsort(dim=-1, descending=True, stable=True)
    chosen = sorted_experts[:, :k]
    weights = activated.gather(1, chosen)
    if is_norm:
        weights = weights / weights.sum(-1, keepdim=True) * torch.tensor(scale, dtype=torch.float32)
    if not enable_expert_mapping:
        return weights, chosen.int()
    check(mapping_num is not None and mapping_table is not None, op,
          "enable_expert_mapping needs mapping_num and mapping_table")  # fmt: skip
    check(mapping_table.dim() == 2 and mapping_table.shape[0] == experts, op,
          f"mapping_table must be [{experts}, replicas], got {tuple(mapping_table.shape)}")  # fmt: skip
    reference_rank = group_topk * (experts // group_num) - 1
    check(reference_rank >= 0, op, "enable_expert_mapping needs group_topk >= 1")
    return weights, _mapped(sorted_experts, chosen, mapping_num, mapping_table, reference_rank)


_ARGS = (
    "Tensor x, Tensor add_num, *, Tensor? mapping_num=None, Tensor? mapping_table=None, str? activation_type=None, "
    "int group_num=1, int group_topk=1, int n=1, int k=1, bool is_norm=True, float scale=1, "
    "bool enable_expert_mapping=False"
)


@npu_op(f"atb::npu_fused_add_topk_div({_ARGS}) -> (Tensor, Tensor)")
def npu_fused_add_topk_div(x, add_num, **options):
    """(weights [tokens, k] float32, expert ids [tokens, k] int32)."""
    return _select(x, add_num, **options)


def _out_fake(x, add_num, *, y, indices, **options):
    return y, indices


@npu_op(f"atb::npu_fused_add_topk_div.out({_ARGS}, Tensor(a!) y, Tensor(b!) indices) -> (Tensor(a!), Tensor(b!))",
        fake=_out_fake)  # fmt: skip
def npu_fused_add_topk_div_out(x, add_num, *, y, indices, **options):
    weights, experts = _select(x, add_num, **options)
    y.copy_(weights)
    indices.copy_(experts)
    return y, indices
