"""MoE permutation with a routing map: npu_moe_token_permute_with_routing_map and
npu_moe_token_unpermute_with_routing_map against Megatron-LM's routing-map permute/unpermute written
here (the algorithm MindSpeed replaces with these operators), forward and backward."""

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu

torch.manual_seed(0)
TOKENS, EXPERTS, HIDDEN, TOPK = 12, 6, 8, 2


def routing(tokens=TOKENS, experts=EXPERTS, topk=TOPK):
    logits = torch.randn(tokens, experts)
    chosen = logits.topk(topk, dim=-1).indices
    routing_map = torch.zeros(tokens, experts, dtype=torch.bool).scatter(1, chosen, True)
    probs = torch.softmax(logits, -1) * routing_map
    return routing_map, probs


def megatron_permute(tokens, routing_map, probs=None, num_out_tokens=None, drop_and_pad=False):
    num_tokens, num_experts = routing_map.shape
    if drop_and_pad:
        capacity = num_out_tokens // num_experts
        mask = routing_map.T.contiguous()
        sorted_indices = mask.to(torch.int8).argsort(dim=-1, descending=True, stable=True)[:, :capacity].reshape(-1)
        permuted_probs = None
        if probs is not None:
            rows = torch.arange(num_experts).unsqueeze(-1) * num_tokens + sorted_indices.view(num_experts, capacity)
            permuted_probs = probs.T.contiguous().view(-1).index_select(0, rows.view(-1))
        return tokens.index_select(0, sorted_indices), permuted_probs, sorted_indices
    mask = routing_map.T.contiguous()
    sorted_indices = torch.arange(num_tokens).unsqueeze(0).expand(num_experts, -1).masked_select(mask)
    permuted_probs = probs.T.contiguous().masked_select(mask) if probs is not None else None
    return tokens.index_select(0, sorted_indices), permuted_probs, sorted_indices


def megatron_unpermute(permuted, sorted_indices, restore_shape, probs=None, routing_map=None, drop_and_pad=False):
    if probs is not None:
        if drop_and_pad:
            num_experts = routing_map.size(1)
            capacity = sorted_indices.numel() // num_experts
            rows = torch.arange(num_experts).unsqueeze(-1) * restore_shape[0] + sorted_indices.view(num_experts, -1)
            weights = probs.T.contiguous().view(-1).index_select(0, rows.view(-1))
            assert weights.numel() == capacity * num_experts
        else:
            weights = probs.T.contiguous().masked_select(routing_map.T.contiguous())
        permuted = permuted * weights.unsqueeze(-1)
    out = torch.zeros(restore_shape, dtype=permuted.dtype)
    return out.scatter_add(0, sorted_indices.unsqueeze(1).expand(-1, restore_shape[1]), permuted)


def test_permute_groups_rows_by_expert_and_returns_each_routes_row():
    routing_map, probs = routing()
    tokens = torch.randn(TOKENS, HIDDEN)

    def ref(tokens, routing_map, probs, num_out_tokens):
        permuted, permuted_probs, token_ids = megatron_permute(tokens, routing_map, probs)
        return permuted, permuted_probs, torch.argsort(token_ids, stable=True).to(torch.int32)

    permuted, _, rows = check_op(
        lambda *a: torch_npu.npu_moe_token_permute_with_routing_map(a[0], a[1], probs=a[2], num_out_tokens=a[3]),
        (tokens, routing_map, probs, TOKENS * TOPK),
        ref,
        atol=0,
        rtol=0,
        grad=(0, 2),
    )
    # each token's routes (listed token by token) point at rows holding that token
    token_of_route = torch.arange(TOKENS).repeat_interleave(TOPK)
    assert torch.equal(permuted.cpu()[rows.cpu().long()], tokens[token_of_route])


def test_permute_with_drop_and_pad_keeps_capacity_rows_per_expert():
    routing_map, probs = routing()
    tokens = torch.randn(TOKENS, HIDDEN)
    capacity = 3

    def ref(tokens, routing_map, probs):
        permuted, permuted_probs, token_ids = megatron_permute(tokens, routing_map, probs, capacity * EXPERTS, True)
        return permuted, permuted_probs, token_ids.to(torch.int32)

    check_op(
        lambda t, r, p: torch_npu.npu_moe_token_permute_with_routing_map(
            t, r, probs=p, num_out_tokens=capacity * EXPERTS, drop_and_pad=True
        ),
        (tokens, routing_map, probs),
        ref,
        atol=0,
        rtol=0,
        grad=(0,),
    )


@pytest.mark.parametrize("with_probs", [True, False])
def test_unpermute_inverts_permute_weighted_by_probs(with_probs):
    routing_map, probs = routing()
    tokens = torch.randn(TOKENS, HIDDEN)
    permuted, _, rows = torch_npu.npu_moe_token_permute_with_routing_map(
        tokens.npu(), routing_map.npu(), num_out_tokens=TOKENS * TOPK
    )
    _, _, token_ids = megatron_permute(tokens, routing_map)
    kwargs = {"probs": probs, "routing_map": routing_map} if with_probs else {}

    def op(permuted, rows, **kw):
        return torch_npu.npu_moe_token_unpermute_with_routing_map(permuted, rows, [TOKENS, HIDDEN], **kw)

    def ref(permuted, rows, **kw):
        return megatron_unpermute(permuted, token_ids, (TOKENS, HIDDEN), kw.get("probs"), kw.get("routing_map"))

    out = check_op(op, (permuted.cpu(), rows.cpu()), ref, kwargs, atol=1e-6, rtol=1e-6, grad=(0,))
    if not with_probs:  # each token comes back TOPK times
        torch.testing.assert_close(out.cpu(), tokens * TOPK)


def test_unpermute_with_drop_and_pad_adds_the_kept_rows_back():
    routing_map, probs = routing()
    tokens = torch.randn(TOKENS, HIDDEN)
    capacity = 3
    permuted, _, token_ids = torch_npu.npu_moe_token_permute_with_routing_map(
        tokens.npu(), routing_map.npu(), num_out_tokens=capacity * EXPERTS, drop_and_pad=True
    )

    def op(permuted, ids, probs, routing_map):
        return torch_npu.npu_moe_token_unpermute_with_routing_map(
            permuted, ids, [TOKENS, HIDDEN], probs=probs, routing_map=routing_map, drop_and_pad=True
        )

    def ref(permuted, ids, probs, routing_map):
        return megatron_unpermute(permuted, ids.long(), (TOKENS, HIDDEN), probs, routing_map, True)

    check_op(op, (permuted.cpu(), token_ids.cpu(), probs, routing_map), ref, atol=1e-6, rtol=1e-6, grad=(0, 2))


class _UnpermuteMaskMap(torch.autograd.Function):
    """The pattern MoE layers (MindSpeed, torchtitan) build on the private forward: keep its maps, hand them to
    the grad operator."""

    @staticmethod
    def forward(ctx, permuted, sorted_indices, restore_shape, probs, routing_map, drop_and_pad):
        out, out_index, token_id, _ = torch_npu._npu_moe_token_unpermute_with_routing_map(
            permuted, sorted_indices, restore_shape, probs=probs, routing_map=routing_map, drop_and_pad=drop_and_pad
        )
        ctx.save_for_backward(permuted, probs, routing_map, out_index, token_id)
        ctx.restore_shape, ctx.drop_and_pad = restore_shape, drop_and_pad
        return out

    @staticmethod
    def backward(ctx, grad):
        permuted, probs, routing_map, out_index, token_id = ctx.saved_tensors
        d_permuted, d_probs = torch_npu.npu_moe_token_unpermute_with_routing_map_grad(
            grad, out_index, token_id, routing_map, permuted, probs, ctx.drop_and_pad, ctx.restore_shape
        )
        return d_permuted, None, None, d_probs, None, None


@pytest.mark.parametrize("drop_and_pad", [False, True], ids=["dropless", "drop_and_pad"])
def test_private_unpermute_returns_the_maps_its_grad_operator_reads(drop_and_pad):
    routing_map, probs = routing()
    tokens = torch.randn(TOKENS, HIDDEN)
    permuted, _, indices = torch_npu.npu_moe_token_permute_with_routing_map(
        tokens.npu(), routing_map.npu(), num_out_tokens=(3 * EXPERTS if drop_and_pad else TOKENS * TOPK),
        drop_and_pad=drop_and_pad,
    )  # fmt: skip
    args = (indices, [TOKENS, HIDDEN])
    kwargs = {"probs": probs.npu(), "routing_map": routing_map.npu(), "drop_and_pad": drop_and_pad}
    out, out_index, token_id, permuted_probs = torch_npu._npu_moe_token_unpermute_with_routing_map(permuted, *args, **kwargs)  # fmt: skip
    assert torch.equal(out.cpu(), torch_npu.npu_moe_token_unpermute_with_routing_map(permuted, *args, **kwargs).cpu())
    index = indices.cpu().long()
    if drop_and_pad:  # the pairs are sorted_indices sorted: row out_index[i] holds token token_id[i]
        assert torch.equal(token_id.cpu().long(), index.sort(stable=True).values)
        assert torch.equal(index[out_index.cpu().long()], token_id.cpu().long())
        capacity = index.numel() // EXPERTS
        assert torch.equal(permuted_probs.cpu(), probs[index, torch.arange(index.numel()) // capacity])
    else:  # route i (token-major) is row sorted_indices[i] of token i // TOPK
        assert torch.equal(out_index.cpu(), indices.cpu())
        assert torch.equal(token_id.cpu().long(), torch.arange(TOKENS * TOPK) // TOPK)
        assert torch.equal(permuted_probs.cpu(), probs.masked_select(routing_map.bool()))  # token-major
    leaves = [permuted.detach().requires_grad_(True), probs.npu().requires_grad_(True)]
    grad = torch.randn(TOKENS, HIDDEN).npu()
    _UnpermuteMaskMap.apply(leaves[0], indices, [TOKENS, HIDDEN], leaves[1], routing_map.npu(), drop_and_pad).backward(grad)  # fmt: skip
    want = [leaf.detach().clone().requires_grad_(True) for leaf in leaves]
    torch_npu.npu_moe_token_unpermute_with_routing_map(want[0], *args, probs=want[1], routing_map=routing_map.npu(), drop_and_pad=drop_and_pad).backward(grad)  # fmt: skip
    for got, expected in zip(leaves, want, strict=True):
        torch.testing.assert_close(got.grad.cpu(), expected.grad.cpu())
    assert (
        torch_npu._npu_moe_token_unpermute_with_routing_map(permuted, *args, drop_and_pad=drop_and_pad)[3].numel() == 0
    )  # (no probs)


MOE_ROUTING_MAP_ERRORS = [
    (
        lambda: torch_npu.npu_moe_token_permute_with_routing_map(
            torch.randn(4, 8, device="npu"), torch.ones(3, 2, dtype=torch.bool, device="npu")
        ),
        "npu_moe_token_permute_with_routing_map: routing_map must be [num_tokens, num_experts] with num_tokens=4, "
        "got (3, 2)",
    ),
    (
        lambda: torch_npu.npu_moe_token_permute_with_routing_map(
            torch.randn(4, 8, device="npu"), torch.ones(4, 2, dtype=torch.bool, device="npu"), num_out_tokens=4
        ),
        "npu_moe_token_permute_with_routing_map: routing_map selects 8 routes but num_out_tokens gives 4 rows "
        "(every token must pick num_out_tokens // num_tokens experts)",
    ),
    (
        lambda: torch_npu.npu_moe_token_unpermute_with_routing_map(
            torch.randn(8, 8, device="npu"),
            torch.zeros(8, dtype=torch.int32, device="npu"),
            [4, 8],
            probs=torch.rand(4, 2, device="npu"),
        ),
        "npu_moe_token_unpermute_with_routing_map: routing_map is required when probs is given (it places the "
        "probs of the routes)",
    ),
]


@pytest.mark.parametrize("call,message", MOE_ROUTING_MAP_ERRORS, ids=[c[1][40:96] for c in MOE_ROUTING_MAP_ERRORS])
def test_moe_routing_map_invalid_arguments(call, message):
    raises_operator_error(call, message)
