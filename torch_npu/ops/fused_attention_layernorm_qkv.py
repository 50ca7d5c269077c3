"""npu_fused_attention_layernorm_qkv_fwd: BERT's LayerNorm followed by the three Q/K/V projections, one call.

x [B * S, H] (S = seq_len); kernel_query/key/value [H, H] in the (in, out) layout, i.e. the transpose of a
Linear weight; gamma, beta [H]; optional biases [H]. Returns the list
[norm [B * S, H], query [B, N, S, H / N], key, value, mean [B * S], variance [B * S]] with N = num_heads:
the LayerNorm statistics are computed in float32 and rounded to the kernels' dtype, as the card's outputs are
allocated (the biased variance, not its reciprocal square root), each
projection is norm @ kernel + bias accumulated in float32 and rounded once, then split into heads.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_fused_attention_layernorm_qkv_fwd"


def _check(x, kernels, gamma, seq_len, num_heads):
    check(x.dim() == 2, _OP, f"x must be 2-D [B * S, H], got {tuple(x.shape)}")
    check(seq_len > 0 and num_heads > 0, _OP, f"seq_len and num_heads must be positive, got {seq_len}, {num_heads}")
    check(
        x.size(0) % seq_len == 0 and x.size(1) % num_heads == 0,
        _OP,
        "x.size(0) should be divisible by seq_len and x.size(1) should be divisible by num_heads.",
    )
    hidden = x.size(1)
    for name, kernel in zip(("kernel_query", "kernel_key", "kernel_value"), kernels):
        check(
            tuple(kernel.shape) == (hidden, hidden),
            _OP,
            f"{name} must be [{hidden}, {hidden}], got {tuple(kernel.shape)}",
        )
    check(tuple(gamma.shape) == (hidden,), _OP, f"gamma must be [{hidden}], got {tuple(gamma.shape)}")


def _fake(x, kernel_query, kernel_key, kernel_value, gamma, beta, bias_query=None, bias_key=None, bias_value=None,
          seq_len=128, num_heads=12, eps=1e-05):  # fmt: skip
    _check(x, (kernel_query, kernel_key, kernel_value), gamma, seq_len, num_heads)
    rows, hidden = x.shape
    heads = (rows // seq_len, num_heads, seq_len, hidden // num_heads)
    stats = [x.new_empty(rows, dtype=kernel_query.dtype) for _ in range(2)]
    return [x.new_empty(rows, hidden), *(x.new_empty(heads) for _ in range(3)), *stats]


@npu_op(
    "npu_fused_attention_layernorm_qkv_fwd(Tensor x, Tensor kernel_query, Tensor kernel_key, Tensor kernel_value, "
    "Tensor gamma, Tensor beta, Tensor? bias_query=None, Tensor? bias_key=None, Tensor? bias_value=None, "
    "int seq_len=128, int num_heads=12, float eps=1e-05) -> Tensor[]",
    fake=_fake,
)
def npu_fused_attention_layernorm_qkv_fwd(x, kernel_query, kernel_key, kernel_value, gamma, beta, bias_query=None,
                                          bias_key=None, bias_value=None, seq_len=128, num_heads=12, eps=1e-05):  # fmt: skip
    """[norm, query, key, value, mean, variance]."""
    kernels = (kernel_query, kernel_key, kernel_value)
    _check(x, kernels, gamma, seq_len, num_heads)
    rows, hidden = x.shape
    xf = x.float()
    mean = xf.mean(-1)
    variance = xf.var(-1, unbiased=False)
    norm = ((xf - mean[:, None]) * torch.rsqrt(variance[:, None] + eps) * gamma.float() + beta.float()).to(x.dtype)
    layers = []
    for kernel, bias in zip(kernels, (bias_query, bias_key, bias_value)):
        y = norm.float() @ kernel.float()
        if bias is not None:
            y = y + bias.float()
        y = y.to(x.dtype).view(rows // seq_len, seq_len, num_heads, hidden // num_heads)
        layers.append(y.permute(0, 2, 1, 3).contiguous())
    return [norm, *layers, mean.to(kernel_query.dtype), variance.to(kernel_query.dtype)]
