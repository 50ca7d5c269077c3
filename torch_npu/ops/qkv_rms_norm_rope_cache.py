"""npu_qkv_rms_norm_rope_cache (+ _functional): a fused QKV projection's output [T, (Nq + Nk + Nv) * D] split by
head_nums; q and k get per-head RmsNorm (q_gamma / k_gamma [D]) and rotate-half RoPE; q is written into q_out
[T, Nq * D]; k and v are (optionally) quantised and written into paged caches at index (one slot per token,
negative = padding). All in float32, rounded once.

qkv_size is [B, S, Nq + Nk + Nv, D] (T = B * S); cos / sin [B * S_rope, N_rope * D] broadcast over the tokens'
positions / heads when S_rope or N_rope is 1. Quantised caches (k_scale / v_scale [N, D]): round(x / scale +
offset) saturated to int8. cache_mode "PA_NZ" (the default): caches [blocks, N * D // last, block_size, last];
"PA" / "PA_BNSD": caches [blocks, block_size, N, D].

Returns (q, k, v) before quantisation ([T, N * D] in qkv's dtype) with is_output_qkv, empty tensors otherwise;
the functional form returns the written copies of q_out, k_cache and v_cache first.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op
from torch_npu.ops.rope import rotate

__all__ = []

_OPTIONS = (
    "int[4] qkv_size, int[3] head_nums, *, Tensor? k_scale=None, Tensor? v_scale=None, Tensor? k_offset=None, "
    "Tensor? v_offset=None, float epsilon=1e-06, str cache_mode='PA_NZ', bool is_output_qkv=False"
)
_OP = "npu_qkv_rms_norm_rope_cache"


def _normed_rope(x, gamma, cos, sin, epsilon):
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + epsilon) * gamma.float()
    return normed * cos + rotate(normed, "half", _OP) * sin


def _quantised(x, scale, offset):
    if scale is None:
        return x if offset is None else x + offset.float()
    out = x / scale.float().reshape(x.shape[-2:]) + (
        offset.float().reshape(x.shape[-2:]) if offset is not None else 0.0
    )
    return torch.round(out).clamp(-128, 127)


def _scatter(cache, values, index, mode):
    rows = values.reshape(-1, *values.shape[-2:]).to(cache.dtype)
    slots = index.reshape(-1).long()
    check(slots.numel() == rows.shape[0], _OP, f"index must hold one slot per token ({rows.shape[0]}), got {slots.numel()}")  # fmt: skip
    keep = slots >= 0
    slots, rows = slots[keep], rows[keep]
    if mode == "PA_NZ":
        block = cache.shape[2]
        cache[slots // block, :, slots % block, :] = rows.reshape(rows.shape[0], cache.shape[1], cache.shape[3])
    else:
        block = cache.shape[1]
        cache[slots // block, slots % block] = rows


def _run(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, head_nums, k_scale, v_scale,
         k_offset, v_offset, epsilon, cache_mode, is_output_qkv):  # fmt: skip
    check(cache_mode in ("PA_NZ", "PA", "PA_BNSD"), _OP, f"cache_mode must be 'PA_NZ', 'PA' or 'PA_BNSD', got {cache_mode!r}")  # fmt: skip
    b, s, n_total, d = qkv_size
    nq, nk, nv = head_nums
    check(nq + nk + nv == n_total and tuple(qkv.shape) == (b * s, n_total * d), _OP,
          f"qkv must be [{b * s}, {n_total * d}] with head_nums {list(head_nums)} summing to {n_total}, got {tuple(qkv.shape)}")  # fmt: skip
    q, k, v = qkv.float().reshape(b, s, n_total, d).split([nq, nk, nv], 2)
    rope_shape = (b, cos.shape[0] // b, cos.shape[-1] // d, d)
    c, sn = cos.float().reshape(rope_shape), sin.float().reshape(rope_shape)
    q_rope, k_rope = _normed_rope(q, q_gamma, c, sn, epsilon), _normed_rope(k, k_gamma, c, sn, epsilon)
    q_out.copy_(q_rope.reshape(b * s, nq * d))
    _scatter(k_cache, _quantised(k_rope, k_scale, k_offset), index, cache_mode)
    _scatter(v_cache, _quantised(v, v_scale, v_offset), index, cache_mode)
    if not is_output_qkv:
        return (qkv.new_empty(0),) * 3
    return tuple(t.reshape(b * s, -1).to(qkv.dtype) for t in (q_rope, k_rope, v))


def _before_fake(qkv, qkv_size, head_nums, is_output_qkv):
    if not is_output_qkv:
        return (qkv.new_empty(0),) * 3
    return tuple(qkv.new_empty(qkv.shape[0], n * qkv_size[3]) for n in head_nums)


@npu_op(
    "npu_qkv_rms_norm_rope_cache(Tensor qkv, Tensor q_gamma, Tensor k_gamma, Tensor cos, Tensor sin, Tensor index, "
    f"Tensor(a!) q_out, Tensor(b!) k_cache, Tensor(c!) v_cache, {_OPTIONS}) -> (Tensor, Tensor, Tensor)",
    fake=lambda qkv, *a, **kw: _before_fake(qkv, a[8], a[9], kw.get("is_output_qkv", False)),
)
def npu_qkv_rms_norm_rope_cache(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, head_nums,
                                *, k_scale=None, v_scale=None, k_offset=None, v_offset=None, epsilon=1e-6,
                                cache_mode="PA_NZ", is_output_qkv=False):  # fmt: skip
    """(q, k, v) before quantisation (or empties); q_out and the caches are written in place."""
    return _run(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, head_nums, k_scale,
                v_scale, k_offset, v_offset, epsilon, cache_mode, is_output_qkv)  # fmt: skip


@npu_op(
    "npu_qkv_rms_norm_rope_cache_functional(Tensor qkv, Tensor q_gamma, Tensor k_gamma, Tensor cos, Tensor sin, "
    f"Tensor index, Tensor q_out, Tensor k_cache, Tensor v_cache, {_OPTIONS}) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=lambda qkv, *a, **kw: (
        torch.empty_like(a[5]),
        torch.empty_like(a[6]),
        torch.empty_like(a[7]),
        *_before_fake(qkv, a[8], a[9], kw.get("is_output_qkv", False)),
    ),  # fmt: skip
)
def npu_qkv_rms_norm_rope_cache_functional(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache,
                                           qkv_size, head_nums, *, k_scale=None, v_scale=None, k_offset=None,
                                           v_offset=None, epsilon=1e-6, cache_mode="PA_NZ", is_output_qkv=False):  # fmt: skip
    """(q_out, k_cache, v_cache written copies, q, k, v before quantisation)."""
    q_new, k_new, v_new = q_out.clone(), k_cache.clone(), v_cache.clone()
    before = _run(qkv, q_gamma, k_gamma, cos, sin, index, q_new, k_new, v_new, qkv_size, head_nums, k_scale, v_scale,
                  k_offset, v_offset, epsilon, cache_mode, is_output_qkv)  # fmt: skip
    return (q_new, k_new, v_new, *before)
