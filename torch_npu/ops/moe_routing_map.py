"""MoE token permutation driven by a routing map (Megatron's `routing_map` router output):
npu_moe_token_permute_with_routing_map and npu_moe_token_unpermute_with_routing_map, as CANN's
MoeTokenPermuteWithRoutingMap / MoeTokenUnpermuteWithRoutingMap compute them.

routing_map is [num_tokens, num_experts] (bool or int8): token t goes to expert e where it is set. Permuted
rows are grouped by expert (expert-major, tokens ascending within an expert), as Megatron's permute orders
them. The two modes differ in what sorted_indices holds:

* drop_and_pad=False: for the routes listed token by token (each token's experts ascending), the row each
  route has in the permuted tokens (int32) — the inverse of Megatron's sorted_indices. Every token is
  expected to pick the same number of experts (top-k), as CANN's formula assumes.
* drop_and_pad=True: each expert keeps `capacity = num_out_tokens // num_experts` rows, its routed tokens
  first (ascending) then padding from the unrouted ones; sorted_indices are those token ids, expert-major.

Both operators are differentiable (autograd of their composition), as torch_npu registers their grads.
_npu_moe_token_unpermute_with_routing_map is the unpermute with the maps its grad operator reads (MoE layers call
it from their own autograd.Function): out_index / permuted_token_id pair each route's permuted row with its
token — drop_and_pad=False: sorted_indices and route // topK; drop_and_pad=True: the positions and values of
sorted_indices sorted (stably) — and permuted_probs are the routes' probs (empty without probs): token-major
(each token's experts ascending) without drop_and_pad, in permuted-row order with it, as op-plugin's reference
orders them.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dtype_support import FLOATS
from torch_npu.ops.registration import npu_op

__all__ = []

_ROUTING_MAP_TYPES = (torch.bool, torch.int8)


def _expert_major_token_ids(routing_map):
    """Token ids of every route, expert-major (Megatron's sorted_indices for drop_and_pad=False)."""
    experts, tokens = routing_map.shape[1], routing_map.shape[0]
    mask = routing_map.bool().T
    return torch.arange(tokens, device=routing_map.device).expand(experts, -1).masked_select(mask), mask


def _capacity_token_ids(routing_map, capacity):
    """[experts, capacity] token ids per expert: routed tokens first (stable), then the others."""
    return routing_map.bool().T.to(torch.int8).argsort(dim=-1, descending=True, stable=True)[:, :capacity]


def _check_routing_map(tokens, routing_map, op):
    check(tokens.dim() == 2, op, f"tokens must be 2-D [num_tokens, hidden], got {tokens.dim()}-D")
    check(
        routing_map.dim() == 2 and routing_map.shape[0] == tokens.shape[0],
        op,
        f"routing_map must be [num_tokens, num_experts] with num_tokens={tokens.shape[0]}, got "
        f"{tuple(routing_map.shape)}",
    )


def _permute_fake(tokens, routing_map, *, probs=None, num_out_tokens=None, drop_and_pad=False):
    per = routing_map.shape[1] if drop_and_pad else routing_map.shape[0]
    rows = (num_out_tokens if num_out_tokens is not None else tokens.shape[0]) // per * per
    permuted_probs = probs.new_empty(rows) if probs is not None else tokens.new_empty(0)
    return tokens.new_empty(rows, tokens.shape[1]), permuted_probs, tokens.new_empty(rows, dtype=torch.int32)


@npu_op(
    "npu_moe_token_permute_with_routing_map(Tensor tokens, Tensor routing_map, *, Tensor? probs=None, "
    "int? num_out_tokens=None, bool drop_and_pad=False) -> (Tensor, Tensor, Tensor)",
    differentiable=True,
    fake=_permute_fake,
    dtypes={"tokens": FLOATS, "routing_map": _ROUTING_MAP_TYPES, "probs": FLOATS},
    api="aclnnMoeTokenPermuteWithRoutingMap",
)
def npu_moe_token_permute_with_routing_map(tokens, routing_map, *, probs=None, num_out_tokens=None, drop_and_pad=False):
    """Returns (permuted_tokens [rows, hidden], permuted_probs [rows] (empty without probs),
    sorted_indices [rows] int32); rows = num_out_tokens (default num_tokens) rounded down to a multiple of
    num_tokens (drop_and_pad=False) or num_experts (drop_and_pad=True)."""
    op = "npu_moe_token_permute_with_routing_map"
    _check_routing_map(tokens, routing_map, op)
    num_tokens, num_experts = routing_map.shape
    requested = num_out_tokens if num_out_tokens is not None else num_tokens
    if drop_and_pad:
        capacity = requested // num_experts
        ids = _capacity_token_ids(routing_map, capacity)
        flat = ids.reshape(-1)
        permuted_probs = tokens.new_empty(0)
        if probs is not None:
            rows = torch.arange(num_experts, device=ids.device).unsqueeze(-1) * num_tokens + ids
            permuted_probs = probs.T.reshape(-1).index_select(0, rows.reshape(-1))
        return tokens.index_select(0, flat), permuted_probs, flat.to(torch.int32)
    rows = requested // num_tokens * num_tokens
    ids, mask = _expert_major_token_ids(routing_map)
    check(
        ids.numel() == rows,
        op,
        f"routing_map selects {ids.numel()} routes but num_out_tokens gives {rows} rows "
        f"(every token must pick num_out_tokens // num_tokens experts)",
    )
    permuted_probs = probs.T.masked_select(mask) if probs is not None else tokens.new_empty(0)
    return tokens.index_select(0, ids), permuted_probs, torch.argsort(ids, stable=True).to(torch.int32)


def _unpermute_fake(
    permuted_tokens, sorted_indices, restore_shape, *, probs=None, routing_map=None, drop_and_pad=False
):
    return permuted_tokens.new_empty(restore_shape[0], restore_shape[1])


@npu_op(
    "npu_moe_token_unpermute_with_routing_map(Tensor permuted_tokens, Tensor sorted_indices, int[] restore_shape, "
    "*, Tensor? probs=None, Tensor? routing_map=None, bool drop_and_pad=False) -> Tensor",
    differentiable=True,
    fake=_unpermute_fake,
    dtypes={"permuted_tokens": FLOATS, "sorted_indices": (torch.int32,), "probs": FLOATS},
    api="aclnnMoeTokenUnpermuteWithRoutingMap",
)
def npu_moe_token_unpermute_with_routing_map(
    permuted_tokens, sorted_indices, restore_shape, *, probs=None, routing_map=None, drop_and_pad=False
):
    """Adds every permuted row (times its route's prob) back into its token: out[restore_shape]. Without
    drop_and_pad a token's routes are added in expert order; with it, in the order of the permuted rows."""
    op = "npu_moe_token_unpermute_with_routing_map"
    check(len(restore_shape) == 2, op, f"restore_shape must be [num_tokens, hidden], got {list(restore_shape)}")
    num_tokens, hidden = restore_shape
    check(
        probs is None or routing_map is not None,
        op,
        "routing_map is required when probs is given (it places the probs of the routes)",
    )
    index = sorted_indices.long()
    if drop_and_pad:
        rows = permuted_tokens
        if probs is not None:
            num_experts = routing_map.shape[1]
            capacity = index.numel() // num_experts
            flat = torch.arange(num_experts, device=index.device).unsqueeze(-1) * num_tokens + index.view(
                num_experts, capacity
            )
            rows = rows * probs.T.reshape(-1).index_select(0, flat.reshape(-1)).unsqueeze(-1).to(rows.dtype)
        out = permuted_tokens.new_zeros(num_tokens, hidden)
        return out.index_add(0, index, rows)
    routes = index.numel()
    check(
        routes % num_tokens == 0,
        op,
        f"sorted_indices holds {routes} routes, not a multiple of num_tokens={num_tokens}",
    )
    rows = permuted_tokens.index_select(0, index)
    if probs is not None:
        expert_major = probs.T.masked_select(routing_map.bool().T)
        rows = rows * expert_major.index_select(0, index).unsqueeze(-1).to(rows.dtype)
    return rows.view(num_tokens, routes // num_tokens, hidden).sum(1)


@npu_op(
    "_npu_moe_token_unpermute_with_routing_map(Tensor permuted_tokens, Tensor sorted_indices, int[] restore_shape, "
    "*, Tensor? probs=None, Tensor? routing_map=None, bool drop_and_pad=False) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=lambda permuted_tokens, sorted_indices, restore_shape, *, probs=None, routing_map=None, drop_and_pad=False: (
        _unpermute_fake(permuted_tokens, sorted_indices, restore_shape),
        torch.empty_like(sorted_indices),
        torch.empty_like(sorted_indices),
        sorted_indices.new_empty(
            0 if probs is None else sorted_indices.numel(),
            dtype=permuted_tokens.dtype if probs is None else probs.dtype,
        ),
    ),  # fmt: skip
    dtypes={"permuted_tokens": FLOATS, "sorted_indices": (torch.int32,), "probs": FLOATS},
    api="aclnnMoeTokenUnpermuteWithRoutingMap",
)
def _npu_moe_token_unpermute_with_routing_map(
    permuted_tokens, sorted_indices, restore_shape, *, probs=None, routing_map=None, drop_and_pad=False
):
    """(unpermuted tokens, out_index, permuted_token_id, permuted_probs): see the module doc."""
    unpermuted = npu_moe_token_unpermute_with_routing_map(
        permuted_tokens, sorted_indices, restore_shape, probs=probs, routing_map=routing_map, drop_and_pad=drop_and_pad
    )
    index = sorted_indices.reshape(-1)
    if drop_and_pad:
        token_ids, rows = torch.sort(index, stable=True)
        out_index, permuted_token_id = rows.to(index.dtype), token_ids
    else:
        top_k = max(index.numel() // restore_shape[0], 1)
        out_index = index.clone()
        permuted_token_id = (torch.arange(index.numel(), device=index.device) // top_k).to(index.dtype)
    if probs is None:
        permuted_probs = permuted_tokens.new_empty(0)
    elif drop_and_pad:
        capacity = index.numel() // probs.shape[1]
        expert = torch.arange(index.numel(), device=index.device) // capacity
        permuted_probs = probs[index.long(), expert]
    else:
        permuted_probs = probs.masked_select(routing_map.bool())
    return unpermuted, out_index, permuted_token_id, permuted_probs
