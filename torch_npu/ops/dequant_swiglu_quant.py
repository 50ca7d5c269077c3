"""npu_dequant_swiglu_quant: the int32 output of a quantised matmul dequantised, put through SwiGLU and
quantised again per token (dynamic int8), with MoE groups of scales.

x (int32 [T, 2H], plus an int32 bias, or float already) is dequantised as x * weight_scale * activation_scale
(weight_scale per channel [2H], or one row per group [G, 2H]; activation_scale per token); SwiGLU halves it
(swiglu_mode 0: silu(x2) * x1, or silu(x1) * x2 with activate_left; swiglu_mode 1, GPT-OSS's variant: even
columns g clamped above at clamp_limit, odd columns l clamped to +-clamp_limit, g * sigmoid(glu_alpha * g) *
(l + glu_bias)); the result is multiplied by quant_scale (per channel, or per group) and quantised per token:
scale = max|out| / 127, y = round(out / scale) (half to even, saturated). group_index counts the tokens of
each group; tokens after the groups come out as zeros. Not supported: static quantisation (quant_mode 0) and
the 950-series arguments (dst_type, round_mode, activate_dim).
"""

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check
from torch_npu.ops.quant import group_row_counts, requantize
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_dequant_swiglu_quant"


def _per_group_rows(parameter, counts, total):
    """parameter [G, C] (or [C] / [1, C] shared) expanded to one row per token [total, C]."""
    if parameter.dim() == 1 or parameter.shape[0] == 1:
        return parameter.reshape(1, -1).expand(total, -1)
    rows = torch.repeat_interleave(parameter, torch.tensor(counts, device=parameter.device), dim=0)
    return torch.cat([rows, rows.new_zeros(total - rows.shape[0], rows.shape[1])])


def _swiglu(x, swiglu_mode, activate_left, clamp_limit, glu_alpha, glu_bias):
    if swiglu_mode == 1:
        gate, linear = x[:, 0::2].clamp(max=clamp_limit), x[:, 1::2].clamp(-clamp_limit, clamp_limit)
        return gate * torch.sigmoid(glu_alpha * gate) * (linear + glu_bias)
    first, second = x.chunk(2, -1)
    return F.silu(first) * second if activate_left else first * F.silu(second)


@npu_op(
    "npu_dequant_swiglu_quant(Tensor x, *, Tensor? weight_scale=None, Tensor? activation_scale=None, "
    "Tensor? bias=None, Tensor? quant_scale=None, Tensor? quant_offset=None, Tensor? group_index=None, "
    "bool activate_left=False, int quant_mode=0, int? dst_type=None, int? round_mode=None, int? activate_dim=None, "
    "int swiglu_mode=0, float clamp_limit=7.0, float glu_alpha=1.702, float glu_bias=1.0) -> (Tensor, Tensor)"
)
def npu_dequant_swiglu_quant(
    x,
    *,
    weight_scale=None,
    activation_scale=None,
    bias=None,
    quant_scale=None,
    quant_offset=None,
    group_index=None,
    activate_left=False,
    quant_mode=0,
    dst_type=None,
    round_mode=None,
    activate_dim=None,
    swiglu_mode=0,
    clamp_limit=7.0,
    glu_alpha=1.702,
    glu_bias=1.0,
):
    check(x.dim() == 2 and x.shape[-1] % 2 == 0, _OP, f"x must be 2-D [tokens, 2H], got {tuple(x.shape)}")
    check(quant_mode == 1, _OP, f"quant_mode={quant_mode}: vnpu supports dynamic quantisation (1) only")
    check(swiglu_mode in (0, 1), _OP, f"swiglu_mode must be 0 or 1, got {swiglu_mode}")
    for name, given in (("dst_type", dst_type), ("round_mode", round_mode), ("activate_dim", activate_dim)):
        check(given is None, _OP, f"{name} is not supported by vnpu")
    check(quant_offset is None, _OP, "quant_offset belongs to static quantisation, which vnpu does not support")
    tokens = x.shape[0]
    counts = [tokens] if group_index is None else group_row_counts(group_index, 1, tokens, _OP)
    covered = sum(counts)
    if x.dtype == torch.int32:
        check(
            weight_scale is not None and activation_scale is not None,
            _OP,
            "an int32 x needs weight_scale and activation_scale (its dequantisation)",
        )
    values = (x if bias is None else x + bias).float()
    if weight_scale is not None:
        values = values * _per_group_rows(weight_scale.float(), counts, tokens)
    if activation_scale is not None:
        values = values * activation_scale.float().reshape(-1, 1)
    out = _swiglu(values, swiglu_mode, activate_left, clamp_limit, glu_alpha, glu_bias)
    if quant_scale is not None:
        out = out * _per_group_rows(quant_scale.float(), counts, tokens)
    scale = out.abs().amax(-1) / 127.0
    y = requantize(out / scale.clamp(min=torch.finfo(torch.float32).tiny).unsqueeze(-1), torch.int8)
    outside = torch.arange(tokens, device=x.device) >= covered
    return y.masked_fill(outside.unsqueeze(-1), 0), scale.masked_fill(outside, 0.0)
