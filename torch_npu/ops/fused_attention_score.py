"""npu_fused_attention_score, and npu_fused_attention_score_fwd / _grad (and its _backward name): BERT's fused
attention block in one call, or split into the forward that keeps what the backward needs, and that backward.

forward: q, v [B, N, S, D], k [B, N, S, D] ([B, N, D, S] with key_transpose); P = softmax(q @ k^T * scale + mask)
(an additive mask); dropout keeps keep_prob; returns (attention_score = (P * drop_mask / keep_prob) @ v with the
heads merged, [B * S, N * D]; softmax_output P [B, N, S, S]; drop_mask uint8, one byte per element of P, flat [B * N * S * S] as the card's
DropOutGenMaskV3 gives it, 1 = kept).
grad: from grad_output [B * S, N * D], P and drop_mask (flat, or in P's shape), (grad_query, grad_key, grad_value) in the layers' shapes,
computed in float32 (as the forward).
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_FLAGS = (
    "bool query_transpose=False, bool key_transpose=False, bool bmm_score_transpose_a=False, "
    "bool bmm_score_transpose_b=False, bool value_transpose=False, bool dx_transpose=False"
)
_GRAD_FLAGS = (
    "bool query_transpose=False, bool key_transpose=False, bool value_transpose=False, bool dx_transpose=False"
)


def _fwd_fake(query_layer, key_layer, value_layer, attention_mask, scale, keep_prob, *flags):
    b, n, s, d = query_layer.shape
    return (query_layer.new_empty(b * s, n * value_layer.shape[-1]), query_layer.new_empty(b, n, s, s),
            query_layer.new_empty(b * n * s * s, dtype=torch.uint8))  # fmt: skip


def _attention(op, query_layer, key_layer, value_layer, attention_mask, scale, keep_prob, key_transpose):
    """(context [B * S, N * Dv] in the query's dtype, P in float32, keep mask or None when keep_prob is 1)."""
    check(query_layer.dim() == 4, op, f"query_layer must be [B, N, S, D], got {tuple(query_layer.shape)}")
    check(0.0 < keep_prob <= 1.0, op, f"keep_prob must be in (0, 1], got {keep_prob}")
    key = key_layer.transpose(-1, -2) if key_transpose else key_layer
    scores = torch.matmul(query_layer.float(), key.float().transpose(-1, -2)) * float(scale)
    probs = torch.softmax(scores + attention_mask.float(), -1)
    keep = torch.rand_like(probs) < keep_prob if keep_prob < 1.0 else None
    dropped = probs * keep / keep_prob if keep is not None else probs
    context = torch.matmul(dropped, value_layer.float()).to(query_layer.dtype)
    b, n, s, d = context.shape
    return context.permute(0, 2, 1, 3).reshape(b * s, n * d), probs, keep


@npu_op(
    "npu_fused_attention_score(Tensor query_layer, Tensor key_layer, Tensor value_layer, Tensor attention_mask, "
    f"Scalar scale, float keep_prob, {_FLAGS}) -> Tensor"
)
def npu_fused_attention_score(query_layer, key_layer, value_layer, attention_mask, scale, keep_prob,
                              query_transpose=False, key_transpose=False, bmm_score_transpose_a=False,
                              bmm_score_transpose_b=False, value_transpose=False, dx_transpose=False):  # fmt: skip
    """The whole block in one call: attention_score [B * S, N * D]."""
    args = (query_layer, key_layer, value_layer, attention_mask, scale, keep_prob, key_transpose)
    return _attention("npu_fused_attention_score", *args)[0]


@npu_op(
    "npu_fused_attention_score_fwd(Tensor query_layer, Tensor key_layer, Tensor value_layer, Tensor attention_mask, "
    f"Scalar scale, float keep_prob, {_FLAGS}) -> (Tensor, Tensor, Tensor)",
    fake=_fwd_fake,
)
def npu_fused_attention_score_fwd(query_layer, key_layer, value_layer, attention_mask, scale, keep_prob,
                                  query_transpose=False, key_transpose=False, bmm_score_transpose_a=False,
                                  bmm_score_transpose_b=False, value_transpose=False, dx_transpose=False):  # fmt: skip
    """(attention_score [B * S, N * D], softmax_output [B, N, S, S], drop_mask uint8 [B * N * S * S])."""
    args = (query_layer, key_layer, value_layer, attention_mask, scale, keep_prob, key_transpose)
    merged, probs, keep = _attention("npu_fused_attention_score_fwd", *args)
    drop_mask = torch.ones_like(probs, dtype=torch.uint8) if keep is None else keep.to(torch.uint8)
    return merged, probs.to(query_layer.dtype), drop_mask.reshape(-1)


def _grad_fake(grad_output, softmax_output, query_layer, key_layer, value_layer, mask, scale, keep_prob, *flags):
    return torch.empty_like(query_layer), torch.empty_like(key_layer), torch.empty_like(value_layer)


def _grad(grad_output, softmax_output, query_layer, key_layer, value_layer, mask, scale, keep_prob,
          query_transpose=False, key_transpose=False, value_transpose=False, dx_transpose=False):  # fmt: skip
    b, n, s, d = query_layer.shape
    dv_heads = value_layer.shape[-1]
    dcontext = grad_output.float().reshape(b, s, n, dv_heads).permute(0, 2, 1, 3)  # [B, N, S, Dv]
    probs = softmax_output.float()
    check(mask.numel() == probs.numel(), "npu_fused_attention_score_grad",
          f"mask must hold one byte per element of softmax_output ({probs.numel()}), got {mask.numel()}")  # fmt: skip
    keep = mask.reshape(probs.shape).float() / keep_prob
    dropped = probs * keep
    grad_value = dropped.transpose(-1, -2) @ dcontext
    dprobs = (dcontext @ value_layer.float().transpose(-1, -2)) * keep
    dscores = probs * (dprobs - (dprobs * probs).sum(-1, keepdim=True)) * float(scale)
    key = key_layer.float().transpose(-1, -2) if key_transpose else key_layer.float()
    grad_query = dscores @ key
    grad_key = dscores.transpose(-1, -2) @ query_layer.float()
    if key_transpose:
        grad_key = grad_key.transpose(-1, -2)
    return grad_query.to(query_layer.dtype), grad_key.to(key_layer.dtype), grad_value.to(value_layer.dtype)


for _name in ("npu_fused_attention_score_grad", "npu_fused_attention_score_backward"):
    npu_op(
        f"{_name}(Tensor grad_output, Tensor softmax_output, Tensor query_layer, Tensor key_layer, "
        f"Tensor value_layer, Tensor mask, Scalar scale, float keep_prob, {_GRAD_FLAGS}) -> (Tensor, Tensor, Tensor)",
        fake=_grad_fake,
    )(_grad)
del _name
