"""The backward operators of npu_moe_token_permute / npu_moe_token_unpermute (MoeTokenPermuteGrad,
MoeTokenUnpermuteGrad), in the forms op-plugin declares: the first takes the forward's tensors, the _v2 forms
take sizes and dtypes instead (what a graph keeps).

permute:    permuted[sorted_indices[t * topk + j]] = tokens[t]    ->  grad_tokens[t] = sum_j grad[sorted_indices[...]]
unpermute:  out[t] = sum_j probs[t, j] * permuted[sorted_indices[t * topk + j]]
            ->  grad_permuted[sorted_indices[t * topk + j]] = probs[t, j] * grad[t];  grad_probs[t, j] = grad[t] . row
Routes whose row num_out_tokens dropped get and give nothing. Sums accumulate in float32.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_NO_PADDED_MODE = "padded_mode=True is not supported (CANN's MoeTokenPermute does not support it either)"


def _routes(grad_rows, sorted_indices):
    """grad_rows[sorted_indices] with a zero row for dropped routes (index >= rows)."""
    hidden = grad_rows.shape[-1]
    padded = torch.cat([grad_rows.float(), grad_rows.new_zeros(1, hidden, dtype=torch.float32)])
    return padded[sorted_indices.long().clamp(max=grad_rows.shape[0])]


def _permute_grad(grad_permuted, sorted_indices, tokens, topk, dtype, op, padded_mode):
    check(not padded_mode, op, _NO_PADDED_MODE)
    check(sorted_indices.numel() == tokens * topk, op, f"sorted_indices holds {sorted_indices.numel()} routes, {tokens} tokens x top-{topk} need {tokens * topk}")  # fmt: skip
    return _routes(grad_permuted, sorted_indices).view(tokens, topk, -1).sum(1).to(dtype)


@npu_op(
    "npu_moe_token_permute_grad(Tensor tokens, Tensor grad_permuted_tokens, Tensor indices, Tensor sorted_indices, "
    "bool padded_mode=False) -> Tensor"
)
def npu_moe_token_permute_grad(tokens, grad_permuted_tokens, indices, sorted_indices, padded_mode=False):
    """grad of tokens [T, H]."""
    topk = indices.shape[1] if indices.dim() > 1 else 1
    op = "npu_moe_token_permute_grad"
    return _permute_grad(grad_permuted_tokens, sorted_indices, tokens.shape[0], topk, tokens.dtype, op, padded_mode)


@npu_op(
    "npu_moe_token_permute_grad_v2(Tensor grad_permuted_tokens, Tensor sorted_indices, int tokens_size_0, "
    "ScalarType tokens_dtype, int num_topK, bool padded_mode=False) -> Tensor"
)
def npu_moe_token_permute_grad_v2(grad_permuted_tokens, sorted_indices, tokens_size_0, tokens_dtype, num_topK,
                                  padded_mode=False):  # fmt: skip
    """grad of tokens [tokens_size_0, H] in tokens_dtype."""
    op = "npu_moe_token_permute_grad_v2"
    return _permute_grad(grad_permuted_tokens, sorted_indices, tokens_size_0, num_topK, tokens_dtype, op, padded_mode)


def _unpermute_grad(grad, sorted_indices, rows, dtype, probs, permuted_tokens, op, padded_mode):
    check(not padded_mode, op, _NO_PADDED_MODE)
    topk = probs.shape[1] if probs is not None else 1
    tokens, hidden = grad.shape[0], grad.shape[-1]
    check(sorted_indices.numel() == tokens * topk, op, f"sorted_indices holds {sorted_indices.numel()} routes, {tokens} tokens x top-{topk} need {tokens * topk}")  # fmt: skip
    weights = probs.float().reshape(-1, 1) if probs is not None else 1.0
    per_route = grad.float().repeat_interleave(topk, 0) * weights  # [T * topk, H]
    index = sorted_indices.long()
    kept = index < rows
    grad_permuted = grad.new_zeros(rows, hidden, dtype=torch.float32)
    grad_permuted.index_put_((index[kept],), per_route[kept], accumulate=True)
    if probs is None:
        grad_probs = grad.new_empty(0, dtype=torch.float32)
    else:
        check(permuted_tokens is not None, op, "the gradient of probs needs permuted_tokens")
        rows_of_routes = _routes(permuted_tokens, sorted_indices)
        grad_probs = (rows_of_routes * grad.float().repeat_interleave(topk, 0)).sum(-1).view(tokens, topk)
        grad_probs = grad_probs.to(probs.dtype)
    return grad_permuted.to(dtype), grad_probs


@npu_op(
    "npu_moe_token_unpermute_grad(Tensor permuted_tokens, Tensor grad_unpermuted_tokens, Tensor sorted_indices, "
    "Tensor? probs=None, bool padded_mode=False, int[]? restore_shape=None) -> (Tensor, Tensor)"
)
def npu_moe_token_unpermute_grad(permuted_tokens, grad_unpermuted_tokens, sorted_indices, probs=None,
                                 padded_mode=False, restore_shape=None):  # fmt: skip
    """(grad of permuted_tokens, grad of probs)."""
    return _unpermute_grad(grad_unpermuted_tokens, sorted_indices, permuted_tokens.shape[0], permuted_tokens.dtype,
                           probs, permuted_tokens, "npu_moe_token_unpermute_grad", padded_mode)  # fmt: skip


@npu_op(
    "npu_moe_token_unpermute_grad_v2(Tensor grad_unpermuted_tokens, Tensor sorted_indices, "
    "int permuted_tokens_size_0, ScalarType permuted_tokens_dtype, Tensor? probs=None, bool padded_mode=False, "
    "int[]? restore_shape=None, Tensor? permuted_tokens=None) -> (Tensor, Tensor)"
)
def npu_moe_token_unpermute_grad_v2(grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0,
                                    permuted_tokens_dtype, probs=None, padded_mode=False, restore_shape=None,
                                    permuted_tokens=None):  # fmt: skip
    """(grad of permuted_tokens [permuted_tokens_size_0, H], grad of probs)."""
    return _unpermute_grad(grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0, permuted_tokens_dtype,
                           probs, permuted_tokens, "npu_moe_token_unpermute_grad_v2", padded_mode)  # fmt: skip
