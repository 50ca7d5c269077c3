"""npu_mla_prolog (+ _v2, _v3, _v3_functional): DeepSeek's Multi-head Latent Attention pre-processing in one
operator (MlaProlog), four paths from token_x [T, He] or [B, S, He]:

    c_q = RmsNorm(x @ W_dq, gamma_cq);  [q_c | q_r_raw] = c_q @ W_uq_qr   ([T, N, D + Dr])
    query = q_c @ W_uk (per head, [T, N, Hckv]);  query_rope = RoPE(q_r_raw)
    [c_kv | k_r_raw] = x @ W_dkv_kr;  kv_cache <- RmsNorm(c_kv, gamma_ckv);  kr_cache <- RoPE(k_r_raw)

RoPE is DeepSeek's interleaved form (npu_interleave_rope) with rope_sin / rope_cos [T, Dr] (or [B, S, Dr]).
Partial quantisation: an int8 W_uq_qr (with dequant_scale_w_uq_qr [1, N * (D + Dr)]) is multiplied by c_q
quantised per token (max |c_q * smooth_scales_cq| / 127), and the product dequantised by both scales. The caches
are written at cache_index (slots of cache_mode PA_BSND [blocks, block_size, Nkv, H] or PA_NZ
[blocks, H // 16, block_size, 16]; v3 also BSND [B, S, Nkv, H] and TND [T, Nkv, H], written in token order).
Everything is computed in float32 and rounded once to token_x's dtype.

npu_mla_prolog returns (query, query_rope, kv_cache, kr_cache) with the caches written in place; _v2 adds
dequant_scale_q_nope; _v3 declares the cache writes and returns (query, query_rope, dequant_scale_q_nope,
query_norm (c_q, with query_norm_flag), dequant_scale_q_norm); _v3_functional returns the written caches after
those. The scales of a non-quantised query are empty tensors (_v2: op-plugin's one-element placeholder). Not computed by vnpu (refused clearly): int8
token_x / W_dq / W_dkv_kr (full quantisation), int8 caches (quant_scale_ckv / quant_scale_ckr, the
kv_cache_quant_modes), query quantisation, and the PA_BLK_* cache modes.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op
from torch_npu.ops.rope import npu_interleave_rope

__all__ = []

_ARGS = (
    "Tensor token_x, Tensor weight_dq, Tensor weight_uq_qr, Tensor weight_uk, Tensor weight_dkv_kr, "
    "Tensor rmsnorm_gamma_cq, Tensor rmsnorm_gamma_ckv, Tensor rope_sin, Tensor rope_cos"
)
_SCALES = (
    "Tensor? dequant_scale_x=None, Tensor? dequant_scale_w_dq=None, Tensor? dequant_scale_w_uq_qr=None, "
    "Tensor? dequant_scale_w_dkv_kr=None, Tensor? quant_scale_ckv=None, Tensor? quant_scale_ckr=None, "
    "Tensor? smooth_scales_cq=None"
)
_V3 = (
    f"*, Tensor? cache_index=None, {_SCALES}, Tensor? actual_seq_len=None, Tensor? k_nope_clip_alpha=None, "
    'float rmsnorm_epsilon_cq=1e-05, float rmsnorm_epsilon_ckv=1e-05, str cache_mode="PA_BSND", '
    "bool query_norm_flag=False, int weight_quant_mode=0, int kv_cache_quant_mode=0, int query_quant_mode=0, "
    "int ckvkr_repo_mode=0, int quant_scale_repo_mode=0, int tile_size=128, float qc_qr_scale=1.0, "
    "float kc_scale=1.0, int? token_x_dtype=None, int? weight_dq_dtype=None, int? weight_uq_qr_dtype=None, "
    "int? weight_dkv_kr_dtype=None, int? kv_cache_dtype=None"
)


def _rms(x, gamma, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()


def _rope(x, cos, sin):
    """DeepSeek's interleaved RoPE of x [T, heads, Dr] with cos / sin [T, Dr], in float32."""
    t, heads, dr = x.shape
    c, s = (v.float().reshape(t, 1, 1, dr).permute(1, 2, 0, 3) for v in (cos, sin))  # [1, 1, T, Dr]
    return npu_interleave_rope(x.permute(1, 0, 2).unsqueeze(0), c, s)[0].permute(1, 0, 2)


def _write(cache, values, cache_index, mode, op):
    """cache <- values [T, H] (one Nkv head) at cache_index per cache_mode."""
    rows = values.to(cache.dtype)
    if mode in ("BSND", "TND"):
        cache.reshape(-1, cache.shape[-1])[: rows.shape[0]] = rows
        return
    check(cache_index is not None, op, f"cache_mode {mode!r} needs cache_index")
    slots = cache_index.reshape(-1).long()
    check(slots.numel() == rows.shape[0], op, f"cache_index must hold one slot per token ({rows.shape[0]}), got {slots.numel()}")  # fmt: skip
    if mode == "PA_NZ":
        block = cache.shape[2]
        cache[slots // block, :, slots % block, :] = rows.reshape(rows.shape[0], cache.shape[1], cache.shape[3])
    else:
        cache.reshape(-1, cache.shape[-1])[slots] = rows


def _prolog(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, gamma_cq, gamma_ckv, rope_sin, rope_cos,
            kv_cache, kr_cache, cache_index, dequant_scale_w_uq_qr, smooth_scales_cq, eps_cq, eps_ckv, cache_mode,
            refused, op):  # fmt: skip
    """(query, query_rope, c_q) with the caches written."""
    modes = ("PA_BSND", "PA_NZ", "BSND", "TND")
    check(cache_mode in modes, op, f"cache_mode must be one of {list(modes)}, got {cache_mode!r}")
    for name, value in refused:
        check(not value, op, f"{name} is not computed by vnpu")
    check(token_x.dtype != torch.int8 and weight_dq.dtype != torch.int8 and weight_dkv_kr.dtype != torch.int8, op,
          "int8 token_x / weight_dq / weight_dkv_kr (full quantisation) are not computed by vnpu")  # fmt: skip
    check(kv_cache.dtype == token_x.dtype and kr_cache.dtype == token_x.dtype, op,
          f"int8 caches are not computed by vnpu: kv_cache / kr_cache must be {token_x.dtype}")  # fmt: skip
    lead = token_x.shape[:-1]
    x = token_x.reshape(-1, token_x.shape[-1]).float()
    t = x.shape[0]
    heads, d, hckv = weight_uk.shape
    c_q = _rms(x @ weight_dq.float(), gamma_cq, eps_cq)
    if weight_uq_qr.dtype == torch.int8:
        check(dequant_scale_w_uq_qr is not None, op, "an int8 weight_uq_qr needs dequant_scale_w_uq_qr")
        smoothed = c_q * smooth_scales_cq.float().reshape(1, -1) if smooth_scales_cq is not None else c_q
        row_scale = smoothed.abs().amax(-1, keepdim=True) / 127.0
        quantised = torch.round(smoothed / row_scale.clamp(min=1e-12)).clamp(-128, 127)
        qcqr = (quantised @ weight_uq_qr.float()) * row_scale * dequant_scale_w_uq_qr.float().reshape(1, -1)
    else:
        qcqr = c_q @ weight_uq_qr.float()
    qcqr = qcqr.reshape(t, heads, -1)
    q_c, q_r = qcqr[..., :d], qcqr[..., d:]
    dr = q_r.shape[-1]
    query = torch.einsum("tnd,ndh->tnh", q_c, weight_uk.float())
    cos, sin = rope_cos.reshape(t, dr), rope_sin.reshape(t, dr)
    query_rope = _rope(q_r, cos, sin)
    kv = x @ weight_dkv_kr.float()
    c_kv, k_r = kv[:, :hckv], kv[:, hckv:]
    _write(kv_cache, _rms(c_kv, gamma_ckv, eps_ckv), cache_index, cache_mode, op)
    _write(kr_cache, _rope(k_r[:, None], cos, sin)[:, 0], cache_index, cache_mode, op)
    dtype = token_x.dtype
    return (query.to(dtype).reshape(*lead, heads, hckv), query_rope.to(dtype).reshape(*lead, heads, dr),
            c_q.to(dtype).reshape(*lead, -1))  # fmt: skip


def _v1_refused(kw):
    return [("quant_scale_ckv / quant_scale_ckr (int8 caches)", kw.get("quant_scale_ckv") is not None or kw.get("quant_scale_ckr") is not None),
            ("dequant_scale_x / dequant_scale_w_dq / dequant_scale_w_dkv_kr", any(kw.get(n) is not None for n in ("dequant_scale_x", "dequant_scale_w_dq", "dequant_scale_w_dkv_kr")))]  # fmt: skip


def _query_fakes(token_x, weight_uk, weight_uq_qr):
    lead = token_x.shape[:-1]
    heads, d, hckv = weight_uk.shape
    dr = weight_uq_qr.shape[-1] // heads - d
    return token_x.new_empty(*lead, heads, hckv), token_x.new_empty(*lead, heads, dr)


def _v1_fake(token_x, weight_dq, weight_uq_qr, weight_uk, *args, **kw):
    kv_cache, kr_cache = args[6], args[7]
    return (*_query_fakes(token_x, weight_uk, weight_uq_qr), torch.empty_like(kv_cache), torch.empty_like(kr_cache))


def _v1(args, kw, op):
    (token_x, w_dq, w_uq_qr, w_uk, w_dkv_kr, g_cq, g_ckv, sin, cos, cache_index, kv_cache, kr_cache) = args
    query, query_rope, _ = _prolog(token_x, w_dq, w_uq_qr, w_uk, w_dkv_kr, g_cq, g_ckv, sin, cos, kv_cache,
                                   kr_cache, cache_index, kw.get("dequant_scale_w_uq_qr"),
                                   kw.get("smooth_scales_cq"), kw.get("rmsnorm_epsilon_cq", 1e-5),
                                   kw.get("rmsnorm_epsilon_ckv", 1e-5), kw.get("cache_mode", "PA_BSND"),
                                   _v1_refused(kw), op)  # fmt: skip
    return query, query_rope, kv_cache, kr_cache


_V1_SCHEMA = (
    f"({_ARGS}, Tensor cache_index, Tensor kv_cache, Tensor kr_cache, *, {_SCALES}, float rmsnorm_epsilon_cq=1e-05, "
    'float rmsnorm_epsilon_ckv=1e-05, str cache_mode="PA_BSND")'
)


@npu_op(f"npu_mla_prolog{_V1_SCHEMA} -> (Tensor, Tensor, Tensor, Tensor)", fake=_v1_fake)
def npu_mla_prolog(*args, **kw):
    """(query, query_rope, kv_cache, kr_cache); the caches are written in place."""
    return _v1(args, kw, "npu_mla_prolog")


@npu_op(
    f"npu_mla_prolog_v2{_V1_SCHEMA} -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=lambda *a, **kw: (*_v1_fake(*a, **kw), a[0].new_empty(1, dtype=torch.float32)),
)
def npu_mla_prolog_v2(*args, **kw):
    """(query, query_rope, kv_cache, kr_cache, dequant_scale_q_nope): the query is not quantised, so the last is
    the one-element float32 placeholder op-plugin allocates then (unwritten on the card, zero here)."""
    return (*_v1(args, kw, "npu_mla_prolog_v2"), args[0].new_zeros(1, dtype=torch.float32))


def _v3_refused(kw):
    modes = [(name, kw.get(name, 0)) for name in ("kv_cache_quant_mode", "query_quant_mode", "ckvkr_repo_mode", "quant_scale_repo_mode")]  # fmt: skip
    return [*_v1_refused(kw), *modes, ("weight_quant_mode 2 (full quantisation)", kw.get("weight_quant_mode", 0) == 2)]


def _v3(args, kw, op):
    (token_x, w_dq, w_uq_qr, w_uk, w_dkv_kr, g_cq, g_ckv, sin, cos, kv_cache, kr_cache) = args
    query, query_rope, c_q = _prolog(token_x, w_dq, w_uq_qr, w_uk, w_dkv_kr, g_cq, g_ckv, sin, cos, kv_cache,
                                     kr_cache, kw.get("cache_index"), kw.get("dequant_scale_w_uq_qr"),
                                     kw.get("smooth_scales_cq"), kw.get("rmsnorm_epsilon_cq", 1e-5),
                                     kw.get("rmsnorm_epsilon_ckv", 1e-5), kw.get("cache_mode", "PA_BSND"),
                                     _v3_refused(kw), op)  # fmt: skip
    empty = token_x.new_empty(0, dtype=torch.float32)
    norm = c_q if kw.get("query_norm_flag", False) else token_x.new_empty(0)
    return query, query_rope, empty, norm, empty


def _v3_fake(token_x, weight_dq, weight_uq_qr, weight_uk, *args, **kw):
    empty = token_x.new_empty(0, dtype=torch.float32)
    norm = token_x.new_empty(*token_x.shape[:-1], weight_dq.shape[-1]) if kw.get("query_norm_flag", False) else token_x.new_empty(0)  # fmt: skip
    return (*_query_fakes(token_x, weight_uk, weight_uq_qr), empty, norm, empty)


@npu_op(
    f"npu_mla_prolog_v3({_ARGS}, Tensor(a!) kv_cache, Tensor(b!) kr_cache, {_V3}) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=_v3_fake,
)
def npu_mla_prolog_v3(*args, **kw):
    """(query, query_rope, dequant_scale_q_nope, query_norm, dequant_scale_q_norm); caches written in place."""
    return _v3(args, kw, "npu_mla_prolog_v3")


@npu_op(
    f"npu_mla_prolog_v3_functional({_ARGS}, Tensor kv_cache, Tensor kr_cache, {_V3}) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=lambda *a, **kw: (*_v3_fake(*a, **kw), torch.empty_like(a[9]), torch.empty_like(a[10])),
)
def npu_mla_prolog_v3_functional(*args, **kw):
    """npu_mla_prolog_v3's outputs, then the written copies of kv_cache and kr_cache."""
    kv_cache, kr_cache = args[9].clone(), args[10].clone()
    outputs = _v3((*args[:9], kv_cache, kr_cache), kw, "npu_mla_prolog_v3_functional")
    return (*outputs, kv_cache, kr_cache)
