"""npu_kv_rmsnorm_rope_cache (+ _v2, _v2_functional): MLA's compressed KV for one step, normalised, rotated and
written into its caches in one operator (KvRmsNormRopeCache, DeepSeek-V2/V3 decode).

kv [B, N, S, Dc + Dr] splits into the latent part (RmsNorm with gamma [Dc], in float32, rounded once) and the
rope part (DeepSeek's interleaved RoPE, as npu_interleave_rope, with cos / sin [B, 1, S, Dr]; both in float32,
rounded once); the results c_kv
and k_rope are written into ckv_cache / k_cache:

- cache_mode "Norm": caches [B, N, cache_len, D]; index [B, S] holds each token's position.
- "PA" / "PA_BNSD": caches [blocks, block_size, N, D]; index [B * S] holds slots (block * block_size + offset).
- "PA_NZ": caches [blocks, N * D // last, block_size, last] (the fractal layout); index as for PA.
Negative positions / slots are padding and write nothing. With k_rope_scale / c_kv_scale (int8 or float8
caches) the value written is x * scale + offset, rounded half to even and saturated for int8 (vnpu's reading of
the card's quantised caches). Not computed: v (the separate value write of the K-norm variant) and the
PA_BLK_* modes.

npu_kv_rmsnorm_rope_cache returns (k_cache, ckv_cache, k_rope, c_kv) — the caches are written in place and
returned, as torch_npu does; k_rope / c_kv ([B, N, S, D]) are filled only with is_output_kv, empty otherwise.
npu_kv_rmsnorm_rope_cache_v2 declares the cache writes (torch.compile can functionalise it) and returns
(k_rope, c_kv); _v2_functional leaves the caches alone and returns written copies first.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op
from torch_npu.ops.rope import npu_interleave_rope

__all__ = []

_OP = "npu_kv_rmsnorm_rope_cache"
_MODES = ("Norm", "PA", "PA_BNSD", "PA_NZ")
_QUANT = (
    "Tensor? k_rope_scale=None, Tensor? c_kv_scale=None, Tensor? k_rope_offset=None, Tensor? c_kv_offset=None, "
    "Tensor? v=None, float epsilon=1e-5, str cache_mode='Norm', bool is_output_kv=False"
)
_V2 = _QUANT + ", int? k_cache_dtype=None, int? ckv_cache_dtype=None"


def _computed(kv, gamma, cos, sin, epsilon, op):
    check(kv.dim() == 4, op, f"kv must be [B, N, S, D], got {tuple(kv.shape)}")
    dc = gamma.shape[-1]
    check(dc < kv.shape[-1], op, f"gamma's {dc} channels leave no rope part in kv's {kv.shape[-1]}")
    latent, rope = kv[..., :dc], kv[..., dc:]
    check(cos.shape[-1] == rope.shape[-1], op, f"cos / sin must have the rope width {rope.shape[-1]}, got {cos.shape[-1]}")  # fmt: skip
    lf = latent.float()
    c_kv = (lf * torch.rsqrt(lf.pow(2).mean(-1, keepdim=True) + epsilon) * gamma.float()).to(kv.dtype)
    shape = (-1, 1, kv.shape[2], rope.shape[-1])
    cos_f, sin_f = (t.float().reshape(shape).expand(kv.shape[0], 1, -1, -1) for t in (cos, sin))
    k_rope = npu_interleave_rope(rope.float(), cos_f, sin_f).to(kv.dtype)  # float32, rounded once
    return k_rope, c_kv


def _stored(values, cache, scale, offset, op):
    if scale is None:
        check(cache.dtype == values.dtype, op, f"a {cache.dtype} cache needs its quantisation scale")
        return values
    quantised = values.float() * scale.float() + (offset.float() if offset is not None else 0.0)
    if cache.dtype == torch.int8:
        return torch.round(quantised).clamp(-128, 127).to(torch.int8)
    check(cache.dtype in (torch.float8_e4m3fn, torch.float8_e5m2), op, f"quantised caches must be int8 or float8, got {cache.dtype}")  # fmt: skip
    return quantised.to(cache.dtype)


def _write(cache, values, index, mode, op):
    """cache[...] = values [B, N, S, D] at index, per cache_mode."""
    b, n, s, d = values.shape
    if mode == "Norm":
        check(index.shape == (b, s), op, f"index must be [B, S] = [{b}, {s}] for cache_mode 'Norm', got {tuple(index.shape)}")  # fmt: skip
        pos = index.long()
        keep = pos >= 0
        batch = torch.arange(b, device=values.device)[:, None].expand(b, s)
        cache.permute(0, 2, 1, 3)[batch[keep], pos[keep]] = values.permute(0, 2, 1, 3)[keep]
        return
    slots = index.reshape(-1).long()
    check(slots.numel() == b * s, op, f"index must hold B * S = {b * s} slots, got {slots.numel()}")
    rows = values.permute(0, 2, 1, 3).reshape(b * s, n, d)
    keep = slots >= 0
    slots, rows = slots[keep], rows[keep]
    if mode == "PA_NZ":
        block_size = cache.shape[2]
        cache[slots // block_size, :, slots % block_size, :] = rows.reshape(rows.shape[0], cache.shape[1], cache.shape[3])  # fmt: skip
    else:
        block_size = cache.shape[1]
        cache[slots // block_size, slots % block_size] = rows


def _run(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale, k_rope_offset, c_kv_offset, v,
         epsilon, cache_mode, op):  # fmt: skip
    check(cache_mode in _MODES, op, f"cache_mode must be one of {list(_MODES)}, got {cache_mode!r}")
    check(v is None, op, "v (the value write of the K-norm variant) is not computed by vnpu")
    k_rope, c_kv = _computed(kv, gamma, cos, sin, epsilon, op)
    _write(k_cache, _stored(k_rope, k_cache, k_rope_scale, k_rope_offset, op), index, cache_mode, op)
    _write(ckv_cache, _stored(c_kv, ckv_cache, c_kv_scale, c_kv_offset, op), index, cache_mode, op)
    return k_rope, c_kv


def _outputs(k_rope, c_kv, is_output_kv):
    return (k_rope, c_kv) if is_output_kv else (k_rope.new_empty(0), c_kv.new_empty(0))


def _fake_outputs(kv, gamma, is_output_kv):
    dc = gamma.shape[-1]
    if not is_output_kv:
        return kv.new_empty(0), kv.new_empty(0)
    return kv.new_empty(*kv.shape[:-1], kv.shape[-1] - dc), kv.new_empty(*kv.shape[:-1], dc)


@npu_op(
    "npu_kv_rmsnorm_rope_cache(Tensor kv, Tensor gamma, Tensor cos, Tensor sin, Tensor index, Tensor k_cache, "
    f"Tensor ckv_cache, *, {_QUANT}) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=lambda kv, gamma, cos, sin, index, k_cache, ckv_cache, **kw: (
        torch.empty_like(k_cache),
        torch.empty_like(ckv_cache),
        *_fake_outputs(kv, gamma, kw.get("is_output_kv", False)),
    ),
)
def npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None, c_kv_scale=None,
                              k_rope_offset=None, c_kv_offset=None, v=None, epsilon=1e-5, cache_mode="Norm",
                              is_output_kv=False):  # fmt: skip
    """(k_cache, ckv_cache, k_rope, c_kv); the caches are written in place."""
    k_rope, c_kv = _run(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale, k_rope_offset,
                        c_kv_offset, v, epsilon, cache_mode, _OP)  # fmt: skip
    return (k_cache, ckv_cache, *_outputs(k_rope, c_kv, is_output_kv))


@npu_op(
    "npu_kv_rmsnorm_rope_cache_v2(Tensor kv, Tensor gamma, Tensor cos, Tensor sin, Tensor index, "
    f"Tensor(a!) k_cache, Tensor(b!) ckv_cache, *, {_V2}) -> (Tensor, Tensor)",
    fake=lambda kv, gamma, cos, sin, index, k_cache, ckv_cache, **kw: _fake_outputs(
        kv, gamma, kw.get("is_output_kv", False)
    ),  # fmt: skip
)
def npu_kv_rmsnorm_rope_cache_v2(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None,
                                 c_kv_scale=None, k_rope_offset=None, c_kv_offset=None, v=None, epsilon=1e-5,
                                 cache_mode="Norm", is_output_kv=False, k_cache_dtype=None, ckv_cache_dtype=None):  # fmt: skip
    """(k_rope, c_kv); the caches are written in place."""
    k_rope, c_kv = _run(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale, k_rope_offset,
                        c_kv_offset, v, epsilon, cache_mode, "npu_kv_rmsnorm_rope_cache_v2")  # fmt: skip
    return _outputs(k_rope, c_kv, is_output_kv)


@npu_op(
    "npu_kv_rmsnorm_rope_cache_v2_functional(Tensor kv, Tensor gamma, Tensor cos, Tensor sin, Tensor index, "
    f"Tensor k_cache, Tensor ckv_cache, *, {_V2}) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=lambda kv, gamma, cos, sin, index, k_cache, ckv_cache, **kw: (
        torch.empty_like(k_cache),
        torch.empty_like(ckv_cache),
        *_fake_outputs(kv, gamma, kw.get("is_output_kv", False)),
    ),
)
def npu_kv_rmsnorm_rope_cache_v2_functional(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None,
                                            c_kv_scale=None, k_rope_offset=None, c_kv_offset=None, v=None,
                                            epsilon=1e-5, cache_mode="Norm", is_output_kv=False, k_cache_dtype=None,
                                            ckv_cache_dtype=None):  # fmt: skip
    """(k_cache written copy, ckv_cache written copy, k_rope, c_kv)."""
    k_out, ckv_out = k_cache.clone(), ckv_cache.clone()
    k_rope, c_kv = _run(kv, gamma, cos, sin, index, k_out, ckv_out, k_rope_scale, c_kv_scale, k_rope_offset,
                        c_kv_offset, v, epsilon, cache_mode, "npu_kv_rmsnorm_rope_cache_v2_functional")  # fmt: skip
    return (k_out, ckv_out, *_outputs(k_rope, c_kv, is_output_kv))
