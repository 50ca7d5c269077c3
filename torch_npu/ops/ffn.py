"""npu_ffn: a transformer FFN in one operator (FFN / MoeFFN):

    y = activation(x @ W1 + b1) @ W2 + b2

activation: fastgelu, gelu (erf form), relu, silu; or the gated geglu / swiglu / reglu, which apply gelu / silu /
relu to the first half of x @ W1 + b1 and multiply by the second half (K2 = N1 / 2). Without experts W1 is
[K1, N1], W2 [K2, N2]; with experts (expert_tokens: tokens per expert, or expert_tokens_index: cumulative ends)
W1 is [E, K1, N1], W2 [E, K2, N2], biases [E, N], and the rows of x are grouped by expert in order (rows
after the last group are zeros). int8 weights with antiquant_scale / antiquant_offset (per output channel, per
expert) are dequantised as (W + offset) * scale (weight-only quantisation). Products accumulate in float32;
the activation output is rounded to x's dtype before the second matmul, as the card stores it.

The fully quantised path (int8 x with scale / offset / deq_scale) is not computed by vnpu: the card's
requantisation between the two matmuls is not published precisely enough to reproduce.
"""

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check
from torch_npu.ops.activations import _fast_gelu
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_ffn"
_ACTIVATIONS = {"fastgelu": _fast_gelu, "gelu": F.gelu, "relu": F.relu, "silu": F.silu}
_GATED = {"geglu": F.gelu, "swiglu": F.silu, "reglu": F.relu}


def _activated(h, activation):
    if activation in _GATED:
        gate, up = h.chunk(2, -1)
        return _GATED[activation](gate) * up
    return _ACTIVATIONS[activation](h)


def _weight(w, scale, offset, e):
    if w.dtype != torch.int8:
        return w.float()
    check(scale is not None, _OP, "int8 weights need antiquant_scale1 / antiquant_scale2")
    pick = (lambda t: t[e]) if e is not None else (lambda t: t)
    w = w.float() + (pick(offset).float() if offset is not None else 0.0)
    return w * pick(scale).float()


def _expert_ranges(m, experts, expert_tokens, expert_tokens_index):
    if expert_tokens is None and expert_tokens_index is None:
        return [(None, 0, m)]
    check(expert_tokens is None or expert_tokens_index is None, _OP, "give expert_tokens or expert_tokens_index, not both")  # fmt: skip
    ends = list(expert_tokens_index) if expert_tokens is None else list(torch.tensor(list(expert_tokens)).cumsum(0).tolist())  # fmt: skip
    check(len(ends) == experts, _OP, f"the weights hold {experts} experts, the token counts {len(ends)}")
    check(all(b <= e for b, e in zip([0, *ends], ends)) and (not ends or ends[-1] <= m), _OP, f"expert token ends {ends} must ascend within the {m} rows of x")  # fmt: skip
    return [(i, b, e) for i, (b, e) in enumerate(zip([0, *ends], ends))]


@npu_op(
    "npu_ffn(Tensor x, Tensor weight1, Tensor weight2, str activation, *, int[]? expert_tokens=None, "
    "int[]? expert_tokens_index=None, Tensor? bias1=None, Tensor? bias2=None, Tensor? scale=None, "
    "Tensor? offset=None, Tensor? deq_scale1=None, Tensor? deq_scale2=None, Tensor? antiquant_scale1=None, "
    "Tensor? antiquant_scale2=None, Tensor? antiquant_offset1=None, Tensor? antiquant_offset2=None, "
    "int? inner_precise=None, ScalarType? output_dtype=None) -> Tensor"
)
def npu_ffn(x, weight1, weight2, activation, *, expert_tokens=None, expert_tokens_index=None, bias1=None,
            bias2=None, scale=None, offset=None, deq_scale1=None, deq_scale2=None, antiquant_scale1=None,
            antiquant_scale2=None, antiquant_offset1=None, antiquant_offset2=None, inner_precise=None,
            output_dtype=None):  # fmt: skip
    """[*, N2] in x's dtype."""
    names = sorted([*_ACTIVATIONS, *_GATED])
    check(activation in names, _OP, f"activation must be one of {names}, got {activation!r}")
    check(
        x.dtype != torch.int8 and scale is None and deq_scale1 is None and deq_scale2 is None,
        _OP,
        "the quantised FFN (int8 x with scale / offset / deq_scale) is computed only on the card; vnpu computes "
        "float x with float or int8 (antiquant) weights",
    )
    check(2 <= x.dim() <= 8, _OP, f"x must have 2 to 8 dimensions, got {x.dim()}")
    experts = weight1.shape[0] if weight1.dim() == 3 else None
    check(weight1.dim() == weight2.dim() and weight1.dim() in (2, 3), _OP, f"weight1 {tuple(weight1.shape)} and weight2 {tuple(weight2.shape)} must both be [K, N] or [E, K, N]")  # fmt: skip
    rows = x.reshape(-1, x.shape[-1])
    ranges = _expert_ranges(rows.shape[0], experts, expert_tokens, expert_tokens_index)
    check(experts is None or ranges[0][0] is not None, _OP, "expert weights [E, K, N] need expert_tokens or expert_tokens_index")  # fmt: skip
    out = rows.new_zeros(rows.shape[0], weight2.shape[-1], dtype=torch.float32)
    for e, begin, end in ranges:
        w1 = _weight(weight1[e] if e is not None else weight1, antiquant_scale1, antiquant_offset1, e)
        w2 = _weight(weight2[e] if e is not None else weight2, antiquant_scale2, antiquant_offset2, e)
        check(w1.shape[0] == rows.shape[1], _OP, f"x's last dim {rows.shape[1]} must equal K1 {w1.shape[0]}")
        h = rows[begin:end].float() @ w1
        if bias1 is not None:
            h = h + (bias1[e] if e is not None else bias1).float()
        h = _activated(h, activation).to(x.dtype).float()
        check(h.shape[-1] == w2.shape[0], _OP, f"the activation gives {h.shape[-1]} channels, weight2 expects K2 = {w2.shape[0]}")  # fmt: skip
        y = h @ w2
        if bias2 is not None:
            y = y + (bias2[e] if e is not None else bias2).float()
        out[begin:end] = y
    return out.to(x.dtype).reshape(*x.shape[:-1], weight2.shape[-1])
