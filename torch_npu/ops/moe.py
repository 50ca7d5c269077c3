"""Mixture-of-experts routing operators: gating (softmax top-k, grouped top-k), routing of tokens to
experts and back (init/finalize routing, token permute/unpermute), expert token counts."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dtype_support import FLOATS, INDEX_TYPES
from torch_npu.ops.registration import npu_op

__all__ = []


@npu_op(
    "npu_moe_gating_top_k_softmax(Tensor x, Tensor? finished=None, int k=1) -> (Tensor, Tensor, Tensor)",
    dtypes={"x": FLOATS, "finished": (torch.bool,)},
    api="aclnnMoeGatingTopKSoftmax",
)
def npu_moe_gating_top_k_softmax(x, finished=None, k=1):
    """p = softmax(x, -1) (float32); y, expert_idx (int32) = topk(p, k); row_idx[n, j] = j * N + n (int32).
    Rows marked finished keep their y and get expert_idx = the number of experts (no expert), as the card does."""
    op = "npu_moe_gating_top_k_softmax"
    check(x.dim() in (2, 3), op, f"x must be 2-D or 3-D, got {x.dim()}-D")
    check(1 <= k <= x.shape[-1], op, f"k={k} must be in [1, {x.shape[-1]}]")
    y, idx = torch.softmax(x.float(), -1).topk(k, dim=-1)
    idx = idx.to(torch.int32)
    if finished is not None:
        idx = idx.masked_fill(finished.to(torch.bool).unsqueeze(-1), x.shape[-1])
    rows = x.shape[:-1].numel()
    row_idx = torch.arange(rows * k, device=x.device, dtype=torch.int32).view(k, rows).t().reshape(*x.shape[:-1], k)
    return y.to(x.dtype), idx, row_idx


def _softmax_v2_fake(x, *, k=1, finished=None, renorm=0, output_softmax=False):
    shape = x.shape if output_softmax and renorm == 0 else (0,)
    softmax = x.new_empty(shape, dtype=torch.float32)
    return x.new_empty(*x.shape[:-1], k), x.new_empty(*x.shape[:-1], k, dtype=torch.int32), softmax


@npu_op(
    "npu_moe_gating_top_k_softmax_v2(Tensor x, *, int k=1, Tensor? finished=None, int? renorm=0, "
    "bool? output_softmax=False) -> (Tensor, Tensor, Tensor)",
    fake=_softmax_v2_fake,
    dtypes={"x": FLOATS, "finished": (torch.bool,)},
    api="aclnnMoeGatingTopKSoftmaxV2",
)
def npu_moe_gating_top_k_softmax_v2(x, *, k=1, finished=None, renorm=0, output_softmax=False):
    """renorm 0: softmax(x) (float32) then top-k; renorm 1: top-k of x then softmax over the k. Returns (y in
    x's dtype, expert_idx int32, the float32 softmax when output_softmax and renorm == 0, else an empty float32
    tensor, as op-plugin allocates it); finished rows get expert_idx = the number of experts."""
    op = "npu_moe_gating_top_k_softmax_v2"
    check(x.dim() in (2, 3), op, f"x must be 2-D or 3-D, got {x.dim()}-D")
    check(1 <= k <= min(x.shape[-1], 1024), op, f"k={k} must be in [1, {min(x.shape[-1], 1024)}]")
    check(renorm in (0, 1), op, f"renorm must be 0 or 1, got {renorm}")
    softmax = x.new_empty(0, dtype=torch.float32)
    if renorm == 0:
        probabilities = torch.softmax(x.float(), -1)
        y, idx = probabilities.topk(k, dim=-1)
        if output_softmax:
            softmax = probabilities
    else:
        top, idx = x.float().topk(k, dim=-1)
        y = torch.softmax(top, -1)
    idx = idx.to(torch.int32)
    if finished is not None:
        idx = idx.masked_fill(finished.to(torch.bool).unsqueeze(-1), x.shape[-1])
    return y.to(x.dtype), idx, softmax


def npu_moe_gating_top_k(
    x,
    k,
    *,
    bias=None,
    input_ids=None,
    tid2eid=None,
    k_group=1,
    group_count=1,
    group_select_mode=0,
    renorm=0,
    norm_type=0,
    out_flag=False,
    routed_scaling_factor=1.0,
    eps=1e-20,
):
    """DeepSeek-V3 style grouped routing over x [T, E]: scores = softmax (norm_type 0) or sigmoid (1);
    experts split into group_count groups ranked by their best score (group_select_mode 0) or the sum of
    their two best (1) of scores + bias; the top k_group groups stay; top-k experts by scores + bias;
    weights = the unbiased scores, normalised to sum 1 for sigmoid, times routed_scaling_factor.
    Returns (weights [T, k], expert_idx int32 [T, k], scores float32 [T, E]): op-plugin allocates the third output
    whatever out_flag says (the card fills it only with out_flag; here it always holds the scores)."""
    op = "npu_moe_gating_top_k"
    check(x.dim() == 2, op, f"x must be 2-D [tokens, experts], got {x.dim()}-D")
    experts = x.shape[-1]
    check(norm_type in (0, 1), op, f"norm_type must be 0 (softmax) or 1 (sigmoid), got {norm_type}")
    check(experts % group_count == 0, op, f"group_count={group_count} must divide the {experts} experts")
    check(1 <= k_group <= group_count, op, f"k_group={k_group} must be in [1, group_count={group_count}]")
    check(group_select_mode in (0, 1), op, f"group_select_mode must be 0 or 1, got {group_select_mode}")
    scores = torch.softmax(x.float(), -1) if norm_type == 0 else torch.sigmoid(x.float())
    biased = scores + bias.float() if bias is not None else scores
    grouped = biased.view(x.shape[0], group_count, -1)
    group_score = grouped.max(-1).values if group_select_mode == 0 else grouped.topk(2, -1).values.sum(-1)
    keep_groups = group_score.topk(k_group, -1).indices
    group_mask = torch.zeros_like(group_score, dtype=torch.bool).scatter_(1, keep_groups, True)
    masked = biased.masked_fill(~group_mask.repeat_interleave(experts // group_count, 1), float("-inf"))
    idx = masked.topk(k, -1).indices
    weights = scores.gather(1, idx)
    if norm_type == 1:
        weights = weights / (weights.sum(-1, keepdim=True) + eps)
    weights = weights * routed_scaling_factor
    return weights.to(x.dtype), idx.to(torch.int32), scores


npu_op(
    "npu_moe_gating_top_k(Tensor x, int k, *, Tensor? bias=None, Tensor? input_ids=None, Tensor? tid2eid=None, "
    "int k_group=1, int group_count=1, int group_select_mode=0, int renorm=0, int norm_type=0, "
    "bool out_flag=False, float routed_scaling_factor=1.0, float eps=1e-20) -> (Tensor, Tensor, Tensor)",
    differentiable=True,
)(npu_moe_gating_top_k)


@npu_op(
    "npu_moe_init_routing(Tensor x, Tensor row_idx, Tensor expert_idx, int active_num) -> (Tensor, Tensor, Tensor)",
    fake=lambda x, row_idx, expert_idx, active_num: (
        x.new_empty(min(x.shape[0], active_num) * expert_idx.shape[-1], x.shape[-1]),
        row_idx.new_empty(row_idx.numel()),
        expert_idx.new_empty(expert_idx.numel()),
    ),
    dtypes={"x": FLOATS, "row_idx": (torch.int32,), "expert_idx": (torch.int32,)},
    api="aclnnMoeInitRouting",
)
def npu_moe_init_routing(x, row_idx, expert_idx, active_num):
    """Sort the (token, k) routes by expert: expanded_expert_idx = the sorted expert ids; dst2src = the
    route (row_idx) at each sorted position; expanded_row_idx[dst2src] = position; expanded_x = the
    token rows of the first min(N, active_num) * k sorted routes."""
    op = "npu_moe_init_routing"
    check(
        x.dim() == 2 and expert_idx.dim() == 2 and row_idx.shape == expert_idx.shape,
        op,
        f"x [N, H], row_idx and expert_idx [N, k] expected, got {tuple(x.shape)}, {tuple(row_idx.shape)}, "
        f"{tuple(expert_idx.shape)}",
    )
    n, k = expert_idx.shape
    flat = expert_idx.reshape(-1)
    order = torch.argsort(flat, stable=True)
    expanded_expert_idx = flat[order].to(torch.int32)
    dst2src = row_idx.reshape(-1)[order].long()
    expanded_row_idx = torch.empty_like(dst2src, dtype=torch.int32)
    expanded_row_idx[dst2src] = torch.arange(n * k, device=x.device, dtype=torch.int32)
    active = min(n, active_num) * k
    return x[dst2src[:active] % n], expanded_row_idx, expanded_expert_idx


@npu_op(
    "npu_moe_compute_expert_tokens(Tensor sorted_expert_for_source_row, int num_expert) -> Tensor",
    dtypes={"sorted_expert_for_source_row": (torch.int32,)},
    api="aclnnMoeComputeExpertTokens",
)
def npu_moe_compute_expert_tokens(sorted_experts, num_expert):
    """out[i] = the number of routes whose (sorted) expert id is <= i, as int32 (cumulative counts)."""
    ids = torch.arange(num_expert, device=sorted_experts.device, dtype=sorted_experts.dtype)
    return torch.searchsorted(sorted_experts.contiguous(), ids, right=True).to(torch.int32)


@npu_op(
    "npu_moe_finalize_routing(Tensor expanded_permuted_rows, Tensor? skip1, Tensor? skip2, Tensor? bias, "
    "Tensor? scales, Tensor expanded_src_to_dst_row, Tensor? export_for_source_row, int? drop_pad_mode=0, "
    "int? k=1) -> Tensor",
    dtypes={
        "expanded_permuted_rows": FLOATS,
        "skip1": FLOATS,
        "skip2": FLOATS,
        "bias": FLOATS,
        "scales": FLOATS,
        "expanded_src_to_dst_row": (torch.int32,),
        "export_for_source_row": (torch.int32,),
    },
    api="aclnnMoeFinalizeRouting",
)
def npu_moe_finalize_routing(
    expanded_permuted_rows,
    skip1,
    skip2,
    bias,
    scales,
    expanded_src_to_dst_row,
    export_for_source_row,
    drop_pad_mode=0,
    k=1,
):
    """out[i] = skip1[i] + skip2[i] + sum_j scales[i, j] * (rows[src_to_dst[i + j * N]] + bias[expert[i, j]])
    (K = scales.shape[1], or k without scales). drop_pad_mode 0 (no dropping), the only mode torch_npu documents here."""
    op = "npu_moe_finalize_routing"
    check(
        drop_pad_mode in (0, None),
        op,
        f"drop_pad_mode must be 0 (the only value torch_npu documents for this operator), got {drop_pad_mode}",
    )
    topk = scales.shape[1] if scales is not None else (k or 1)
    rows = expanded_src_to_dst_row.numel() // topk
    hidden = expanded_permuted_rows.shape[-1]
    gathered = expanded_permuted_rows[expanded_src_to_dst_row.long()].view(topk, rows, hidden).transpose(0, 1)
    if bias is not None:
        check(export_for_source_row is not None, op, "bias needs export_for_source_row")
        gathered = gathered + bias[export_for_source_row.long()]
    weights = scales.unsqueeze(-1) if scales is not None else 1.0
    out = (gathered * weights).sum(1)
    for skip in (skip1, skip2):
        if skip is not None:
            out = out + skip
    return out.to(expanded_permuted_rows.dtype)


_NO_PADDED_MODE = "padded_mode=True is not supported (CANN's MoeTokenPermute does not support it either)"


def _permuted_rows(num_out_tokens, routes):
    """Rows npu_moe_token_permute keeps: all routes (None or 0), the first num_out_tokens of them (positive), or
    all but the last -num_out_tokens (negative), as torch_npu's meta function counts them."""
    if not num_out_tokens:
        return routes
    return min(num_out_tokens, routes) if num_out_tokens > 0 else max(routes + num_out_tokens, 0)


@npu_op(
    "npu_moe_token_permute(Tensor tokens, Tensor indices, int? num_out_tokens=None, bool padded_mode=False) "
    "-> (Tensor, Tensor)",
    differentiable=True,
    fake=lambda tokens, indices, num_out_tokens=None, padded_mode=False: (
        tokens.new_empty(_permuted_rows(num_out_tokens, indices.numel()), tokens.shape[-1]),
        indices.new_empty(indices.numel(), dtype=torch.int32),
    ),
    dtypes={"tokens": FLOATS, "indices": INDEX_TYPES},
    api="aclnnMoeTokenPermute",
)
def npu_moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False):
    """Routes (token t, choice j) sorted by expert: order = stable argsort of the flattened expert ids,
    permuted = tokens[order // topk] truncated to num_out_tokens; sorted_indices (int32) is argsort(order),
    each route's row in permuted (the CANN formula, argSort applied twice — not Megatron's order itself)."""
    check(not padded_mode, "npu_moe_token_permute", _NO_PADDED_MODE)
    topk = indices.shape[1] if indices.dim() > 1 else 1
    order = torch.argsort(indices.reshape(-1), stable=True)
    count = _permuted_rows(num_out_tokens, order.numel())
    return tokens[order[:count] // topk], torch.argsort(order).to(torch.int32)


def _unpermute_setup(ctx, inputs, output):
    ctx.save_for_backward(*(t if t is not None else torch.empty(0) for t in (inputs[0], inputs[1], inputs[2])))
    ctx.has_probs, ctx.padded_mode = inputs[2] is not None, inputs[3]


def _unpermute_backward(ctx, grad):
    permuted, sorted_indices, probs = ctx.saved_tensors
    grad_permuted, grad_probs = torch.ops.npu.npu_moe_token_unpermute_grad(
        permuted, grad, sorted_indices, probs if ctx.has_probs else None, ctx.padded_mode
    )
    return grad_permuted, None, grad_probs if ctx.has_probs else None, None, None


@npu_op(
    "npu_moe_token_unpermute(Tensor permuted_tokens, Tensor sorted_indices, Tensor? probs=None, "
    "bool padded_mode=False, int[]? restore_shape=None) -> Tensor",
    dtypes={"permuted_tokens": FLOATS, "sorted_indices": (torch.int32,), "probs": FLOATS},
    api="aclnnMoeTokenUnpermute",
    backward=_unpermute_backward,
    setup_context=_unpermute_setup,
)
def npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    """Inverse of npu_moe_token_permute: out[t] = sum_j probs[t, j] * permuted_tokens[sorted_indices[t * topk + j]]
    (routes whose row num_out_tokens dropped count as zeros)."""
    check(not padded_mode, "npu_moe_token_unpermute", _NO_PADDED_MODE)
    topk = probs.shape[1] if probs is not None else 1
    hidden = permuted_tokens.shape[-1]
    padded = torch.cat([permuted_tokens, permuted_tokens.new_zeros(1, hidden)])
    rows = sorted_indices.long().clamp(max=permuted_tokens.shape[0])
    unpermuted = padded[rows].view(-1, topk, hidden)
    if probs is not None:
        unpermuted = unpermuted * probs.unsqueeze(-1).to(unpermuted.dtype)
    return unpermuted.sum(1)
