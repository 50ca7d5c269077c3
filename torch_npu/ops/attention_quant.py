"""Quantisation in the inference attention operators (npu_prompt_flash_attention, npu_incre_flash_attention,
npu_fused_infer_attention_score).

Three independent pieces, as the operators document them:
- KV antiquant: int8 key/value caches dequantised as (kv + offset) * scale in the query's dtype, per channel
  (mode 0: scales shaped like one token of the cache, e.g. [H], [N, 1, D] or [N, D]) or per token (mode 1:
  [B, S]); incre/FIA's antiquant_scale stacks the key and value scales as [2, ...].
- Full int8 attention: int8 query/key/value with dequant_scale1 after q @ k^T, quant_scale1 before p @ v
  and dequant_scale2 after it: s = (q @ k^T) * dequant_scale1 * scale, p = softmax(s),
  out = (round(p * quant_scale1) @ v) * dequant_scale2, in float16.
- Output quantisation: out = round(out * quant_scale2 + quant_offset2), saturated to int8; the scale is per
  tensor or per channel of the output (same shapes as a per-channel antiquant scale).
Scales may arrive as float32 or as the int64 form torch_npu.npu_trans_quant_param produces (the float32 bits
in the low 32 bits). Rounding is half to even, as the quantisation operators.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.attention_core import score_bias
from torch_npu.ops.quant import requantize

__all__ = []


def scale_values(scale):
    """float32 scale values; int64 scales carry float32 bits in their low 32 bits (npu_trans_quant_param)."""
    if scale.dtype in (torch.int64, torch.uint64):
        low = scale.to(torch.int64) & 0xFFFFFFFF
        return torch.where(low >= 2**31, low - 2**32, low).to(torch.int32).view(torch.float32)
    return scale.float()


def _channel_shape(t, layout, numel, op, name):
    """A per-channel parameter's broadcast shape against t (one token's worth of values)."""
    if layout == "BNSD" and t.dim() == 4:
        return (t.shape[1], 1, t.shape[3])
    if layout == "NBSD" and t.dim() == 4:
        return (t.shape[0], 1, 1, t.shape[3])
    if layout == "TND" and t.dim() == 3:
        return (t.shape[1], t.shape[2])
    if t.dim() == 4:  # BSND
        return (t.shape[2], t.shape[3])
    check(numel == t.shape[-1], op, f"{name} must hold one value per channel ({t.shape[-1]}), got {numel}")
    return (t.shape[-1],)


def _per_channel(param, t, layout, op, name):
    if param.numel() == 1:
        return scale_values(param).reshape(())
    shape = _channel_shape(t, layout, param.numel(), op, name)
    check(
        param.numel() == torch.Size(shape).numel(),
        op,
        f"{name} must be per tensor or per channel {list(shape)}, got {tuple(param.shape)}",
    )
    return scale_values(param).reshape(shape)


def _per_token(param, t, layout, op, name):
    b, s = (t.shape[0], t.shape[2]) if layout == "BNSD" else (t.shape[0], t.shape[1])
    check(param.numel() == b * s, op, f"{name} per token must be [B={b}, S={s}], got {tuple(param.shape)}")
    values = scale_values(param).reshape(b, s)
    if layout == "BNSD":
        return values.view(b, 1, s, 1)
    return values.view(b, s, *([1] * (t.dim() - 2)))


def dequantised_kv(kv, scale, offset, mode, layout, dtype, op, name):
    """(kv + offset) * scale in dtype; mode 0 per channel, 1 per token."""
    check(mode in (0, 1), op, f"{name} mode must be 0 (per channel) or 1 (per token), got {mode}")
    check(kv.dtype == torch.int8, op, f"antiquant needs an int8 {name}, got {kv.dtype}")
    spread = _per_channel if mode == 0 else _per_token
    value = kv.float()
    if offset is not None:
        value = value + spread(offset, kv, layout, op, f"{name} antiquant offset")
    return (value * spread(scale, kv, layout, op, f"{name} antiquant scale")).to(dtype)


def split_antiquant(antiquant_scale, antiquant_offset, op):
    """incre/FIA's stacked [2, ...] antiquant parameters -> ((key scale, key offset), (value scale, value offset))."""
    for name, t in (("antiquant_scale", antiquant_scale), ("antiquant_offset", antiquant_offset)):
        if t is None:
            continue
        check(
            t.dim() >= 2 and t.shape[0] == 2,
            op,
            f"{name} must stack the key's and the value's parameters as [2, ...], got {tuple(t.shape)}",
        )
    offsets = (None, None) if antiquant_offset is None else (antiquant_offset[0], antiquant_offset[1])
    return (antiquant_scale[0], offsets[0]), (antiquant_scale[1], offsets[1])


def requantised_output(out, layout, quant_scale2, quant_offset2, op):
    """round(out * quant_scale2 + quant_offset2) as int8, per tensor or per channel of out."""
    value = out.float() * _per_channel(quant_scale2, out, layout, op, "quant_scale2")
    if quant_offset2 is not None:
        value = value + _per_channel(quant_offset2, out, layout, op, "quant_offset2")
    return requantize(value, torch.int8)


def int8_attend(q, k, v, *, scale, mask, pse, dequant_scale1, quant_scale1, dequant_scale2, op):
    """(out float16, lse) of int8 q/k/v [B, N, S, D] with per-tensor dequant/quant scales."""
    check(
        q.dtype == k.dtype == v.dtype == torch.int8,
        op,
        f"dequant_scale1 (int8 attention) needs int8 query, key and value, got {q.dtype}, {k.dtype}, {v.dtype}",
    )
    check(
        quant_scale1 is not None and dequant_scale2 is not None,
        op,
        "int8 attention needs dequant_scale1, quant_scale1 and dequant_scale2",
    )
    scores = torch.matmul(q.float(), k.float().transpose(-2, -1)) * (scale_values(dequant_scale1).reshape(()) * scale)
    bias = score_bias(q, scale=scale, mask=mask, pse=pse)
    if bias is not None:
        scores = scores + bias
    lse = torch.logsumexp(scores, -1, keepdim=True)
    probs = requantize(torch.exp(scores - lse) * scale_values(quant_scale1).reshape(()), torch.int8)
    out = torch.matmul(probs.float(), v.float()) * scale_values(dequant_scale2).reshape(())
    return out.to(torch.float16), lse
