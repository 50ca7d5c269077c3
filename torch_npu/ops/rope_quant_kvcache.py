"""npu_rope_quant_kvcache / npu_dequant_rope_quant_kvcache: a fused QKV projection's output split into q / k / v,
RoPE on q and k, k and v quantised and written into int8 KV caches (RopeQuantKvcache, DequantRopeQuantKvcache).

x [B, S, H] (BSND) or [T, H] splits along the last dim by size_splits into q [.., Nq, D], k and v [.., Nkv, D]
(D = cos.shape[-1], Nkv = the caches' head count); q and k get rotate-half RoPE with cos / sin ([B, S, 1, D] or
[T, 1, D]), computed in float32; the cache values are round(value * scale + offset) saturated to int8, scale /
offset per channel ([D] or [Nkv, D]). cache_mode "contiguous": caches [B, cache_len, Nkv, D] and tokens s of
batch b go to position indices[b] + s; "page": caches [blocks, block_size, Nkv, D] with one slot per token in
indices. The caches are written in place and returned, as torch_npu does.
Returns (q, k, v, k_cache, v_cache); k and v (the un-quantised values) are empty unless kv_output.

npu_dequant_rope_quant_kvcache takes the int32 output of an int8 QKV matmul: x * weight_scale (per channel)
* activation_scale (per token, with quant_mode 1) + bias, in float32, before the same steps; q, k and v come out
in cos's dtype.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op
from torch_npu.ops.rope import rotate

__all__ = []

_COMMON = (
    'int quant_mode=0, str input_layout="BSND", bool kv_output=False, str cache_mode="contiguous") '
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)"
)


def _per_channel(t, heads, d):
    return t.float().reshape(heads, d) if t.numel() == heads * d else t.float().reshape(d)


def _quantised(values, scale, offset):
    heads, d = values.shape[-2:]
    out = values.float() * _per_channel(scale, heads, d)
    if offset is not None:
        out = out + _per_channel(offset, heads, d)
    return torch.round(out).clamp(-128, 127).to(torch.int8)


def _write(cache, values, indices, cache_mode, op):
    if cache_mode == "contiguous":
        check(values.dim() == 4, op, "cache_mode 'contiguous' needs x as [B, S, H]")
        b, s = values.shape[:2]
        check(indices.numel() == b, op, f"indices must hold one start per batch ({b}), got {indices.numel()}")
        positions = indices.reshape(b, 1).long() + torch.arange(s, device=values.device)
        batch = torch.arange(b, device=values.device)[:, None].expand(b, s)
        check(bool((positions < cache.shape[1]).all()), op, f"indices + S exceed the cache length {cache.shape[1]}")
        cache[batch, positions] = values
        return
    rows = values.reshape(-1, *values.shape[-2:])
    slots = indices.reshape(-1).long()
    check(slots.numel() == rows.shape[0], op, f"indices must hold one slot per token ({rows.shape[0]}), got {slots.numel()}")  # fmt: skip
    flat = cache.view(-1, *cache.shape[-2:])
    keep = slots >= 0
    flat[slots[keep]] = rows[keep]


def _rope_quant(x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, offset_k, offset_v,
                input_layout, kv_output, cache_mode, out_dtype, op):  # fmt: skip
    check(len(size_splits) == 3 and size_splits[0] >= 0, op, f"size_splits must be [q, k, v] widths, got {list(size_splits)}")  # fmt: skip
    check(x.dim() in (2, 3), op, f"x must be [B, S, H] or [T, H], got {tuple(x.shape)}")
    check(v_cache.dim() == 4 and k_cache.dim() == 4, op, "4D tensor expected for input cache")
    check(input_layout == "BSND", op, f"input_layout must be 'BSND', got {input_layout!r}")
    check(cache_mode in ("contiguous", "page"), op, f"cache_mode must be 'contiguous' or 'page', got {cache_mode!r}")
    check(sum(size_splits) == x.shape[-1], op, f"size_splits {list(size_splits)} must sum to x's last dim {x.shape[-1]}")  # fmt: skip
    d, kv_heads = cos.shape[-1], k_cache.shape[-2]
    q, k, v = x.split(list(size_splits), -1)
    lead = x.shape[:-1]
    q, k, v = (t.reshape(*lead, -1, d) for t in (q, k, v))
    check(k.shape[-2] == kv_heads and v.shape[-2] == v_cache.shape[-2], op, f"k and v must have the caches' {kv_heads} heads of {d}")  # fmt: skip
    c, s = (t.float().reshape(*lead, 1, d) for t in (cos, sin))
    q_rope, k_rope = ((t * c + rotate(t, "half", op) * s) for t in (q.float(), k.float()))
    _write(k_cache, _quantised(k_rope, scale_k, offset_k), indices, cache_mode, op)
    _write(v_cache, _quantised(v, scale_v, offset_v), indices, cache_mode, op)
    k_out, v_out = (k_rope.to(out_dtype), v.to(out_dtype)) if kv_output else (x.new_empty(0, dtype=out_dtype),) * 2
    return q_rope.to(out_dtype), k_out, v_out, k_cache, v_cache


def _fake(x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, *args, kv_output=False, **kw):
    d, lead = cos.shape[-1], x.shape[:-1]
    dtype = x.dtype if x.is_floating_point() else cos.dtype
    q = x.new_empty(*lead, size_splits[0] // d, d, dtype=dtype)
    kv = (x.new_empty(*lead, k_cache.shape[-2], d, dtype=dtype),) * 2 if kv_output else (x.new_empty(0, dtype=dtype),) * 2  # fmt: skip
    return q, kv[0], torch.empty_like(kv[1]), torch.empty_like(k_cache), torch.empty_like(v_cache)


@npu_op(
    "npu_rope_quant_kvcache(Tensor x, Tensor cos, Tensor sin, Tensor k_cache, Tensor v_cache, Tensor indices, "
    "Tensor scale_k, Tensor scale_v, int[3] size_splits, *, Tensor? offset_k=None, Tensor? offset_v=None, " + _COMMON,
    fake=_fake,
)
def npu_rope_quant_kvcache(x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, *, offset_k=None,
                           offset_v=None, quant_mode=0, input_layout="BSND", kv_output=False,
                           cache_mode="contiguous"):  # fmt: skip
    """(q, k, v, k_cache, v_cache)."""
    op = "npu_rope_quant_kvcache"
    check(quant_mode == 0, op, f"quant_mode must be 0 (per-channel scales), got {quant_mode}")
    return _rope_quant(x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, offset_k, offset_v,
                       input_layout, kv_output, cache_mode, x.dtype, op)  # fmt: skip


@npu_op(
    "npu_dequant_rope_quant_kvcache(Tensor x, Tensor cos, Tensor sin, Tensor k_cache, Tensor v_cache, "
    "Tensor indices, Tensor scale_k, Tensor scale_v, int[3] size_splits, *, Tensor? offset_k=None, "
    "Tensor? offset_v=None, Tensor? weight_scale=None, Tensor? activation_scale=None, Tensor? bias=None, " + _COMMON,
    fake=_fake,
)
def npu_dequant_rope_quant_kvcache(x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, *,
                                   offset_k=None, offset_v=None, weight_scale=None, activation_scale=None, bias=None,
                                   quant_mode=0, input_layout="BSND", kv_output=False,
                                   cache_mode="contiguous"):  # fmt: skip
    """(q, k, v, k_cache, v_cache) of an int32 QKV projection output."""
    op = "npu_dequant_rope_quant_kvcache"
    check(quant_mode in (0, 1), op, f"quant_mode must be 0 (no activation scale) or 1 (per token), got {quant_mode}")
    values = x.float()
    if x.dtype == torch.int32:
        check(weight_scale is not None, op, "an int32 x needs weight_scale")
    if weight_scale is not None:
        values = values * weight_scale.float()
    if activation_scale is not None:
        check(quant_mode == 1, op, "activation_scale needs quant_mode 1 (per-token scales)")
        values = values * activation_scale.float().reshape(*x.shape[:-1], 1)
    if bias is not None:
        values = values + bias.float()
    return _rope_quant(values, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, offset_k, offset_v,
                       input_layout, kv_output, cache_mode, cos.dtype, op)  # fmt: skip
