"""npu_quant_fusion_attention / npu_quant_fusion_attention_backward: flash attention on float8 (or HiFloat8)
query, key and value with per-block dequantisation scales (QuantFlashAttention, Ascend 950).

d_scale_q [B, N1, ceil(Sq / 128), 1] scales query rows in blocks of 128; d_scale_k / d_scale_v [B, N2, ceil(Skv / 256),
1] key / value rows in blocks of 256 (or all in blocks of 512, as the HiFloat8 kernels use; layouts BNSD, BSND, BSH, SBH; N1 a multiple of N2). As op-plugin's golden:
    s = scale * (q * d_scale_q) (k * d_scale_k)^T;  m = rowmax(s);  p = float8_e4m3fn(exp(s - m))  (HiFloat8 for
    HiFloat8 inputs; times p_scale before the cast and divided after, when given);  l = rowsum(p)
    out = p (v * d_scale_v) / l, float16, with softmax_max / softmax_sum [B, N1, Sq, 8] (m and l repeated).
Returns (attention_out, softmax_max, softmax_sum, an empty softmax_out, seed 0, offset 0, numels 0).
The backward dequantises dy with d_scale_dy (blocks of 128 or 512 rows) and returns the float16 gradients with respect
to the dequantised query, key and value (p and ds unrounded: p_scale and ds_scale are accepted, not applied), plus the
empty dpse, dq_rope, dk_rope and dsink.
"""

import math

import torch

from torch_npu._c_children import DTypeNumber
from torch_npu.ops._common import check
from torch_npu.ops.attention_core import from_bnsd, to_bnsd
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import recording_gradients
from torch_npu.utils import hifloat8

__all__ = []

_OP = "npu_quant_fusion_attention"
_Q_BLOCK, _KV_BLOCK, _WIDE_BLOCK = 128, 256, 512
_LAYOUTS = ("BNSD", "BSND", "BSH", "SBH")
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def _values(t, query_dtype, name, op):
    if query_dtype is not None and int(query_dtype) == DTypeNumber.hifloat8:
        check(t.element_size() == 1, op, f"{name} holds HiFloat8 codes and must be 8-bit, got {t.dtype}")
        return hifloat8.decode(t)
    check(t.dtype in _FP8, op, f"{name} must be float8_e4m3fn / float8_e5m2, or HiFloat8 codes with query_dtype, got {t.dtype}")  # fmt: skip
    return t.float()


def _bnsd(t, layout, heads, name, op):
    if layout in ("BSH", "SBH"):
        return to_bnsd(t, layout, heads, op, name)
    return to_bnsd(t, layout, 0, op, name)


def _dequantised(t, scale, block, name, op):
    """t [B, N, S, D] float32 times its per-block scale [B, N, blocks, 1]: blocks of `block` rows, or of 512 when the
    scale holds ceil(S / 512) blocks (the HiFloat8 kernels' block)."""
    b, n, s, _ = t.shape
    check(scale is not None and scale.dim() == 4 and tuple(scale.shape[:2]) == (b, n) and scale.shape[3] == 1, op,
          f"d_scale_{name} must be [{b}, {n}, blocks, 1], got {None if scale is None else tuple(scale.shape)}")  # fmt: skip
    sizes = [size for size in (block, _WIDE_BLOCK) if math.ceil(s / size) == scale.shape[2]]
    check(bool(sizes), op, f"d_scale_{name} must hold ceil(S / {block}) = {math.ceil(s / block)} (or ceil(S / 512)) blocks, got {scale.shape[2]}")  # fmt: skip
    return t * scale.float().repeat_interleave(sizes[0], 2)[:, :, :s]


def _operands(query, key, value, head_num, layout, d_scale_q, d_scale_k, d_scale_v, query_dtype, op):
    check(layout in _LAYOUTS, op, f"input_layout must be one of {_LAYOUTS}, got {layout!r}")
    q = _bnsd(_values(query, query_dtype, "query", op), layout, head_num, "query", op)
    d = q.shape[-1]
    kv_heads = key.shape[-1] // d if layout in ("BSH", "SBH") else None
    k = _bnsd(_values(key, query_dtype, "key", op), layout, kv_heads, "key", op)
    v = _bnsd(_values(value, query_dtype, "value", op), layout, kv_heads, "value", op)
    check(q.shape[1] % k.shape[1] == 0, op, f"query heads ({q.shape[1]}) must be a multiple of key heads ({k.shape[1]})")  # fmt: skip
    return (_dequantised(q, d_scale_q, _Q_BLOCK, "q", op), _dequantised(k, d_scale_k, _KV_BLOCK, "k", op),
            _dequantised(v, d_scale_v, _KV_BLOCK, "v", op))  # fmt: skip


def _expanded(q, k, v):
    group = q.shape[1] // k.shape[1]
    return k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)


def _rounded_probs(e, p_scale, query_dtype):
    factor = 1.0 if p_scale is None else p_scale.float().reshape(-1)[0]
    scaled = e * factor
    if query_dtype is not None and int(query_dtype) == DTypeNumber.hifloat8:
        rounded = hifloat8.decode(hifloat8.encode(scaled))
    else:
        rounded = scaled.to(torch.float8_e4m3fn).float()
    return rounded / factor


def _fake(query, key, value, head_num, input_layout, *, d_scale_q, d_scale_k, d_scale_v, p_scale=None, scale=1.0,
          query_dtype=None):  # fmt: skip
    q = _bnsd(query.new_empty(query.shape, dtype=torch.float32), input_layout, head_num, "query", _OP)
    b, n, s, _ = q.shape
    stats = (b, n, s, 8)
    return (query.new_empty(query.shape, dtype=torch.float16), query.new_empty(stats, dtype=torch.float32),
            query.new_empty(stats, dtype=torch.float32), query.new_empty(0, dtype=torch.float16), 0, 0, 0)  # fmt: skip


@npu_op(
    "npu_quant_fusion_attention(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, *, "
    "Tensor d_scale_q, Tensor d_scale_k, Tensor d_scale_v, Tensor? p_scale=None, float scale=1., "
    "int? query_dtype=None) -> (Tensor, Tensor, Tensor, Tensor, int, int, int)",
    fake=_fake,
)
def npu_quant_fusion_attention(query, key, value, head_num, input_layout, *, d_scale_q, d_scale_k, d_scale_v,
                               p_scale=None, scale=1.0, query_dtype=None):  # fmt: skip
    """(attention_out float16, softmax_max, softmax_sum, softmax_out (empty), seed, offset, numels)."""
    q, k, v = _operands(query, key, value, head_num, input_layout, d_scale_q, d_scale_k, d_scale_v, query_dtype, _OP)
    k, v = _expanded(q, k, v)
    s = (q @ k.transpose(-1, -2)) * scale
    row_max = s.amax(-1, keepdim=True)
    p = _rounded_probs(torch.exp(s - row_max), p_scale, query_dtype)
    row_sum = p.sum(-1, keepdim=True)
    out = (p @ v) / row_sum
    widen = (*row_max.shape[:-1], 8)
    return (from_bnsd(out, input_layout).to(torch.float16), row_max.expand(widen).contiguous(),
            row_sum.expand(widen).contiguous(), query.new_empty(0, dtype=torch.float16), 0, 0, 0)  # fmt: skip


def _grad_fake(query, key, value, dy, head_num, input_layout, *args, **kwargs):
    empty = query.new_empty(0, dtype=torch.float16)
    return (query.new_empty(query.shape, dtype=torch.float16), key.new_empty(key.shape, dtype=torch.float16),
            value.new_empty(value.shape, dtype=torch.float16), empty, empty, empty, empty)  # fmt: skip


@npu_op(
    "npu_quant_fusion_attention_backward(Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, "
    "str input_layout, Tensor d_scale_q, Tensor d_scale_k, Tensor d_scale_v, Tensor d_scale_dy, *, "
    "Tensor? p_scale=None, Tensor? ds_scale=None, Tensor? softmax_max=None, Tensor? softmax_sum=None, "
    "Tensor? attention_in=None, float scale_value=1., int? query_dtype=None) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=_grad_fake,
)
def npu_quant_fusion_attention_backward(query, key, value, dy, head_num, input_layout, d_scale_q, d_scale_k,
                                        d_scale_v, d_scale_dy, *, p_scale=None, ds_scale=None, softmax_max=None,
                                        softmax_sum=None, attention_in=None, scale_value=1.0, query_dtype=None):  # fmt: skip
    """(dq, dk, dv float16 in the inputs' layout, dpse, dq_rope, dk_rope, dsink empty)."""
    op = "npu_quant_fusion_attention_backward"
    q, k, v = _operands(query, key, value, head_num, input_layout, d_scale_q, d_scale_k, d_scale_v, query_dtype, op)
    grad = _dequantised(_bnsd(_values(dy, query_dtype, "dy", op), input_layout, head_num, "dy", op), d_scale_dy,
                        _Q_BLOCK, "dy", op)  # fmt: skip
    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
    with recording_gradients():
        ke, ve = _expanded(*leaves)
        probs = torch.softmax((leaves[0] @ ke.transpose(-1, -2)) * scale_value, -1)
        dq, dk, dv = torch.autograd.grad(probs @ ve, leaves, grad)
    empty = query.new_empty(0, dtype=torch.float16)
    return (from_bnsd(dq, input_layout).to(torch.float16), from_bnsd(dk, input_layout).to(torch.float16),
            from_bnsd(dv, input_layout).to(torch.float16), empty, empty, empty, empty)  # fmt: skip
