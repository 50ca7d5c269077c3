"""BERT self-attention in one call (torch_npu.contrib.npu_fused_attention[_with_layernorm]).

hidden_states [B*S, H] (FRACTAL_NZ), attention_mask [B, 1, S, S] (FRACTAL_NZ), kernels [H, H]
(FRACTAL_NZ, applied as x @ kernel), biases [H] (ND), heads of 64 channels (H/64 heads), as the
NPU kernel requires; the formats are checked like torch_npu checks them. Result: the context
layer [B*S, H] = dropout(softmax(q k^T * scale + mask), 1 - keep_prob) v, heads merged.
"""

import torch
import torch.nn.functional as F

from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = ["npu_fused_attention", "npu_fused_attention_with_layernorm"]

_HEAD_DIM = 64
_NZ, _ND = 29, 2


def _check_formats(tensors, expected):
    import torch_npu

    formats = [torch_npu.get_npu_format(t) for t in tensors]
    if formats != expected:
        raise RuntimeError(
            "fused attention check compatibility failed, format not matches (expected "
            f"{expected}, got {formats})" + ops_error(ErrCode.VALUE)
        )


def _attention(
    hidden, attention_mask, query_kernel, key_kernel, value_kernel, query_bias, key_bias, value_bias, scale, keep_prob
):
    batch, seq = attention_mask.shape[0], attention_mask.shape[-1]
    hidden_size = hidden.shape[-1]
    if hidden_size % _HEAD_DIM:
        raise RuntimeError(
            f"fused attention needs a hidden size divisible by {_HEAD_DIM}, got {hidden_size}"
            + ops_error(ErrCode.PARAM)
        )
    heads = hidden_size // _HEAD_DIM

    def project(kernel, bias):
        return (hidden @ kernel + bias).view(batch, seq, heads, _HEAD_DIM).permute(0, 2, 1, 3)

    q, k, v = project(query_kernel, query_bias), project(key_kernel, key_bias), project(value_kernel, value_bias)
    probs = F.softmax(torch.matmul(q, k.transpose(-2, -1)) * scale + attention_mask, dim=-1)
    if keep_prob < 1.0:
        probs = F.dropout(probs, p=1.0 - keep_prob, training=True)
    context = torch.matmul(probs, v)
    return context.permute(0, 2, 1, 3).reshape(batch * seq, hidden_size)


def _fused_attention(
    hidden_states,
    attention_mask,
    query_kernel,
    key_kernel,
    value_kernel,
    query_bias,
    key_bias,
    value_bias,
    scale=1,
    keep_prob=0,
):
    _check_formats(
        [hidden_states, attention_mask, query_kernel, key_kernel, value_kernel, query_bias, key_bias, value_bias],
        [_NZ] * 5 + [_ND] * 3,
    )
    return _attention(
        hidden_states,
        attention_mask,
        query_kernel,
        key_kernel,
        value_kernel,
        query_bias,
        key_bias,
        value_bias,
        scale,
        keep_prob,
    )


def _fused_attention_with_layernorm(
    hidden_states,
    attention_mask,
    query_kernel,
    key_kernel,
    value_kernel,
    query_bias,
    key_bias,
    value_bias,
    gamma,
    beta,
    scale=1,
    keep_prob=0,
):
    _check_formats(
        [
            hidden_states,
            attention_mask,
            query_kernel,
            key_kernel,
            value_kernel,
            query_bias,
            key_bias,
            value_bias,
            gamma,
            beta,
        ],
        [_NZ] * 5 + [_ND] * 5,
    )
    normed = F.layer_norm(hidden_states, hidden_states.shape[-1:], gamma, beta, eps=1e-5)
    return _attention(
        normed,
        attention_mask,
        query_kernel,
        key_kernel,
        value_kernel,
        query_bias,
        key_bias,
        value_bias,
        scale,
        keep_prob,
    )


def npu_fused_attention(*args, **kwargs):
    """npu_fused_attention(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel, query_bias,
    key_bias, value_bias, scale=1, keep_prob=0) -> context [B*S, H]."""
    return _fused_attention(*args, **kwargs)


def npu_fused_attention_with_layernorm(*args, **kwargs):
    """npu_fused_attention_with_layernorm(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel,
    query_bias, key_bias, value_bias, gamma, beta, scale=1, keep_prob=0): layer normalisation (eps 1e-5)
    of hidden_states, then npu_fused_attention."""
    return _fused_attention_with_layernorm(*args, **kwargs)
