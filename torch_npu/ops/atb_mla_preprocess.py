"""torch_npu.atb.npu_mla_preprocess: ATB's fused input pipeline of DeepSeek-style multi-head latent attention at
decode (MlaPreprocessOperation), from the hidden states [tokens, hidden] to the two query halves and the two paged
caches that npu_multi_head_latent_attention reads:

    x0 = quant(rms_norm(input, gamma0) + beta0)                     int8
    h  = dequant(x0 @ wdqkv^T)                                      [tokens, 576 + q_lora], input's dtype
    kv, q_lora = h[:, :576], h[:, 576:]
    x1 = quant(rms_norm(q_lora, gamma1) + beta1)                    int8
    q  = dequant(x1 @ wuq^T) viewed [tokens, heads, nope + 64]
    q_out0 = q[..., :nope] @ wuk[head]                              [tokens, heads, 512]
    q_out1 = rope(q[..., nope:])                                    [tokens, heads, 64]
    kv_cache[slot] = rms_norm(kv[:, :512], gamma2); kv_cache_rope[slot] = rope(kv[:, 512:])

quant_mode "per_tensor_quant_asymm": round((y) * (1 / quant_scale) + quant_offset) saturated to int8, the matmul's
int32 sum plus bias, times descale; "per_token_quant_symm" (the default): y rounded to the input dtype, each token
scaled by 127 / max|y|, the matmul's sum times descale and the token's max|y| / 127 (bias unused, as on the card).
descale is float32, or for float16 inputs ATB's int64 words (a float32's bits). Products of int8 accumulate
exactly; norms, dequantisation, the up-projection by wuk and the rotation (rotate-half, cos and sin [tokens, 64]
over the whole rotary width) compute in float32 and round once to the input dtype; epsilon is op-plugin's 1e-5.

cache_mode "krope_ctkv" (the default): ND caches [blocks, block_size, 1, 512] and [blocks, block_size, 1, 64].
"nzcache": the same rows in FRACTAL_NZ caches (the NZ modes read a cache's layout from the mode, as the card's kernel
does, not from its format tag). "int8_nzcache": FRACTAL_NZ caches with the latent quantised to
int8 by 1 / ctkv_scale (that quotient and the product rounded to float16 first, as ATB's reference does), and
q_out0 quantised per head by q_nope_scale [heads]. A negative slot writes nothing. Weights are ND
([rows, hidden], wuk [heads, nope, 512]) or given in the card's NZ block order ([1, hidden / 32, rows, 32],
wuk [heads, 512 / 16, nope, 16]). An NZ cache whose blocks are wider than a token's row (op-plugin's samples size
them [blocks, heads * 512 / 32, block_size, 32]) is addressed as the card's kernel does: as consecutive blocks of
block_size * 512 (or * 64) elements. The functional form returns new caches (kv_cache and kv_cache_rope with the
tokens' rows written); the out form gives kv_cache_out0 / kv_cache_out1 the same contents (vLLM passes the caches
themselves, which are then written in place)."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.atb_attention import float_scales
from torch_npu.ops.atb_mla import op_mode
from torch_npu.ops.atb_paged_cache import fractal_rows, write_rows
from torch_npu.ops.norms import rms_statistics
from torch_npu.ops.quant import int_accumulate, requantize
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_mla_preprocess"
_CACHE_MODES = ("krope_ctkv", "int8_nzcache", "nzcache")
_QUANT_MODES = ("per_tensor_quant_asymm", "per_token_quant_symm")
_LATENT, _ROPE = 512, 64
_EPS = 1e-5


def _unblocked(blocked):
    """[n, rows, K] from the card's NZ block order [n, K / c0, rows, c0]."""
    return fractal_rows(blocked).reshape(blocked.shape[0], blocked.shape[2], -1)


def _nd_weight(weight, name):
    """A weight [rows, cols] from its ND form or from the card's NZ block order [1, cols / c0, rows, c0]."""
    if weight.dim() == 4 and weight.shape[0] == 1:
        return _unblocked(weight)[0]
    check(weight.dim() == 2, _OP, f"{name} must be [rows, hidden] or [1, hidden / 32, rows, 32], got {tuple(weight.shape)}")  # fmt: skip
    return weight


def _nd_wuk(wuk):
    """wuk [heads, nope, 512] from its ND form or from NZ block order [heads, 512 / 16, nope, 16]."""
    if wuk.dim() == 4:
        return _unblocked(wuk)
    check(wuk.dim() == 3, _OP, f"wuk must be [heads, nope, 512] or [heads, 32, nope, 16], got {tuple(wuk.shape)}")
    return wuk


def _normed(x, gamma, beta=None):
    """rms_norm(x) * gamma (+ beta), float32."""
    xf, rstd = rms_statistics(x, gamma.reshape(-1), _EPS, _OP)
    y = xf * rstd * gamma.reshape(-1).float()
    return y if beta is None else y + beta.reshape(-1).float()


def _quantised(x, gamma, beta, scale, offset, per_token, stage):
    """(int8 x, the per-token descale or None) of one RmsNormQuant stage."""
    y = _normed(x, gamma, beta)
    if per_token:
        y = y.to(x.dtype).float()
        peak = y.abs().amax(dim=-1, keepdim=True)
        token_scale = torch.where(peak > 0, 127.0 / peak, 1.0)  # (a zero token stays zero)
        return requantize(y * token_scale, torch.int8), torch.reciprocal(token_scale)
    check(scale is not None and offset is not None, _OP, f"quant_mode 'per_tensor_quant_asymm' needs quant_scale{stage} and quant_offset{stage}")  # fmt: skip
    inverse = torch.reciprocal(scale.reshape(-1)[:1].float())  # (= float32(1 / scale) computed in float64)
    return requantize(y * inverse + offset.reshape(-1)[:1].float(), torch.int8), None


def _dequantised(x, weight, descale, bias, token_descale, dtype):
    """x @ weight^T summed exactly, plus bias (per-tensor mode), times descale (and the token's), in dtype."""
    acc = int_accumulate(x, weight.t())
    if token_descale is None and bias is not None:
        acc = acc + bias.reshape(-1).to(torch.int64)
    value = acc.float() * float_scales(descale).reshape(-1)
    return (value if token_descale is None else value * token_descale).to(dtype)


def _rotated(x, cos, sin):
    """x [tokens, heads, 64] * cos + rotate_half(x) * sin, cos and sin [tokens, 64], in float32."""
    first, second = x.float().chunk(2, dim=-1)
    return x.float() * cos.float()[:, None] + torch.cat((-second, first), dim=-1) * sin.float()[:, None]


def _check_inputs(input, wdq, wuq, wuk, gamma1, cos, sin, slotmapping):
    tokens = input.shape[0]
    check(input.dim() == 2 and input.dtype in (torch.float16, torch.bfloat16), _OP, f"input must be float16 or bfloat16 [tokens, hidden], got {input.dtype} {tuple(input.shape)}")  # fmt: skip
    for weight, name in ((wdq, "wdqkv"), (wuq, "wuq")):
        check(weight.dtype == torch.int8, _OP, f"{name} must be int8, got {weight.dtype}")
    q_lora = wdq.shape[0] - _LATENT - _ROPE
    check(wdq.shape[1] == input.shape[1] and gamma1.numel() == q_lora, _OP, f"wdqkv must be [{_LATENT + _ROPE} + q_lora ({gamma1.numel()}), {input.shape[1]}], got {tuple(wdq.shape)}")  # fmt: skip
    heads, nope = wuk.shape[0], wuk.shape[1]
    check(wuk.shape[2] == _LATENT, _OP, f"wuk must be [heads, nope, {_LATENT}], got {tuple(wuk.shape)}")
    check(tuple(wuq.shape) == (heads * (nope + _ROPE), q_lora), _OP, f"wuq must be [{heads} * ({nope} + {_ROPE}), {q_lora}], got {tuple(wuq.shape)}")  # fmt: skip
    for table, name in ((cos, "cos"), (sin, "sin")):
        check(tuple(table.shape) == (tokens, _ROPE), _OP, f"{name} must be [{tokens}, {_ROPE}], got {tuple(table.shape)}")  # fmt: skip
    check(slotmapping.numel() == tokens, _OP, f"slotmapping must hold {tokens} slots, got {slotmapping.numel()}")
    return heads, nope


def _card_caches(cache_mode, caches):
    """The caches as rows [blocks, block_size, ...] the way the kernel addresses them: ND as given; in the NZ modes
    as consecutive blocks [width / c0, block_size, c0] of one token row (512 or 64 values) per block row, whatever
    their second dim (and, as on the card, whatever format they are tagged with)."""
    rows = []
    for (cache, name), width in zip(caches, (_LATENT, _ROPE), strict=True):
        if cache_mode == "krope_ctkv":
            check(cache.dim() == 4 and cache.shape[2:].numel() == width, _OP, f"{name} must be [blocks, block_size, 1, {width}] for cache_mode 'krope_ctkv', got {tuple(cache.shape)}")  # fmt: skip
            rows.append(cache)
            continue
        c0 = 32 // cache.element_size()  # a fractal row is 32 bytes
        fits = cache.dim() == 4 and cache.is_contiguous() and cache.shape[-1] == c0 and cache.numel() % (width * cache.shape[2]) == 0  # fmt: skip
        check(fits, _OP, f"{name} must be a contiguous [blocks, {width} / {c0}, block_size, {c0}] cache for cache_mode '{cache_mode}', got {tuple(cache.shape)}")  # fmt: skip
        rows.append(fractal_rows(cache.view(-1, width // c0, cache.shape[2], c0)))
    return rows


def _preprocess(input, gamma0, beta0, wdqkv, descale0, gamma1, beta1, wuq, descale1, gamma2, cos, sin, wuk,
                slotmapping, options, caches):  # fmt: skip
    """(q_out0, q_out1) and the rows written into caches = (ctkv cache, rope cache)."""
    cache_mode = op_mode(_OP, options.get("cache_mode"), "krope_ctkv", _CACHE_MODES, "cache_mode")
    per_token = op_mode(_OP, options.get("quant_mode"), "per_token_quant_symm", _QUANT_MODES, "quant_mode") == "per_token_quant_symm"  # fmt: skip
    wdq, wuq, wuk = _nd_weight(wdqkv, "wdqkv"), _nd_weight(wuq, "wuq"), _nd_wuk(wuk)
    heads, nope = _check_inputs(input, wdq, wuq, wuk, gamma1, cos, sin, slotmapping)
    caches = _card_caches(cache_mode, ((caches[0], "kv_cache"), (caches[1], "kv_cache_rope")))
    dtype, tokens = input.dtype, input.shape[0]
    x0, token_descale = _quantised(input, gamma0, beta0, options.get("quant_scale0"), options.get("quant_offset0"), per_token, 0)  # fmt: skip
    h = _dequantised(x0, wdq, descale0, options.get("bias0"), token_descale, dtype)
    kv, q_lora = h[:, : _LATENT + _ROPE], h[:, _LATENT + _ROPE :]
    x1, token_descale = _quantised(q_lora, gamma1, beta1, options.get("quant_scale1"), options.get("quant_offset1"), per_token, 1)  # fmt: skip
    q = _dequantised(x1, wuq, descale1, options.get("bias1"), token_descale, dtype).view(tokens, heads, nope + _ROPE)
    q_nope = torch.einsum("thn,hnl->thl", q[..., :nope].float(), wuk.float()).to(dtype)
    q_rope = _rotated(q[..., nope:], cos, sin).to(dtype)
    latent = _normed(kv[:, :_LATENT], gamma2).to(dtype)
    k_rope = _rotated(kv[:, None, _LATENT:], cos, sin).to(dtype).view(tokens, _ROPE)
    if cache_mode == "int8_nzcache":
        ctkv_scale, q_nope_scale = options.get("ctkv_scale"), options.get("q_nope_scale")
        check(ctkv_scale is not None and q_nope_scale is not None, _OP, "cache_mode 'int8_nzcache' needs ctkv_scale and q_nope_scale")  # fmt: skip
        inverse = torch.reciprocal(ctkv_scale.reshape(-1)[:1]).float()
        latent = requantize((latent.float() * inverse).half().float(), torch.int8)
        product = q_nope.float() * q_nope_scale.reshape(1, heads, 1).float()
        q_nope = requantize(product.half().float() if dtype == torch.float16 else product, torch.int8)
    write_rows(latent, caches[0], slotmapping)
    write_rows(k_rope, caches[1], slotmapping)
    return q_nope, q_rope


_ARGS = (
    "Tensor input, Tensor gamma0, Tensor beta0, Tensor wdqkv, Tensor descale0, Tensor gamma1, Tensor beta1, "
    "Tensor wuq, Tensor descale1, Tensor gamma2, Tensor cos, Tensor sin, Tensor wuk, Tensor kv_cache, "
    "Tensor kv_cache_rope, Tensor slotmapping, *, Tensor? quant_scale0=None, Tensor? quant_offset0=None, "
    "Tensor? bias0=None, Tensor? quant_scale1=None, Tensor? quant_offset1=None, Tensor? bias1=None, "
    "Tensor? ctkv_scale=None, Tensor? q_nope_scale=None, str? cache_mode=None, str? quant_mode=None"
)


def _fake(input, gamma0, beta0, wdqkv, descale0, gamma1, beta1, wuq, descale1, gamma2, cos, sin, wuk, kv_cache,
          kv_cache_rope, slotmapping, **options):  # fmt: skip
    """op-plugin's output shapes: q_out0 [tokens, heads, 512] in kv_cache's dtype, q_out1 [tokens, heads, 64]."""
    tokens, heads = input.shape[0], wuk.shape[0]
    q_out0 = input.new_empty(tokens, heads, _LATENT, dtype=kv_cache.dtype)
    return q_out0, torch.empty_like(kv_cache), input.new_empty(tokens, heads, _ROPE), torch.empty_like(kv_cache_rope)


@npu_op(f"atb::npu_mla_preprocess({_ARGS}) -> (Tensor, Tensor, Tensor, Tensor)", fake=_fake)
def npu_mla_preprocess(input, gamma0, beta0, wdqkv, descale0, gamma1, beta1, wuq, descale1, gamma2, cos, sin, wuk,
                       kv_cache, kv_cache_rope, slotmapping, **options):  # fmt: skip
    """(q_out0, kv_cache_out0, q_out1, kv_cache_out1): the queries, and copies of the caches with each token's
    latent and rotary key written into its slot (see the module doc)."""
    caches = (kv_cache.clone(), kv_cache_rope.clone())
    q_nope, q_rope = _preprocess(input, gamma0, beta0, wdqkv, descale0, gamma1, beta1, wuq, descale1, gamma2, cos, sin, wuk, slotmapping, options, caches)  # fmt: skip
    return q_nope, caches[0], q_rope, caches[1]


@npu_op(
    f"atb::npu_mla_preprocess.out({_ARGS}, Tensor(a!) q_out0, Tensor(b!) kv_cache_out0, Tensor(c!) q_out1, "
    "Tensor(d!) kv_cache_out1) -> (Tensor(a!), Tensor(b!), Tensor(c!), Tensor(d!))",
    fake=lambda *args, q_out0, kv_cache_out0, q_out1, kv_cache_out1, **options: (
        q_out0,
        kv_cache_out0,
        q_out1,
        kv_cache_out1,
    ),  # fmt: skip
)
def npu_mla_preprocess_out(input, gamma0, beta0, wdqkv, descale0, gamma1, beta1, wuq, descale1, gamma2, cos, sin,
                           wuk, kv_cache, kv_cache_rope, slotmapping, *, q_out0, kv_cache_out0, q_out1,
                           kv_cache_out1, **options):  # fmt: skip
    """Writes the queries into q_out0 / q_out1, and kv_cache / kv_cache_rope with each token's rows written into
    kv_cache_out0 / kv_cache_out1 (nothing is copied when they are the caches themselves)."""
    for out, cache in ((kv_cache_out0, kv_cache), (kv_cache_out1, kv_cache_rope)):
        if out.data_ptr() != cache.data_ptr():
            out.copy_(cache)
    q_nope, q_rope = _preprocess(input, gamma0, beta0, wdqkv, descale0, gamma1, beta1, wuq, descale1, gamma2, cos, sin, wuk, slotmapping, options, (kv_cache_out0, kv_cache_out1))  # fmt: skip
    for out, value, name in ((q_out0, q_nope, "q_out0"), (q_out1, q_rope, "q_out1")):
        check(out.shape == value.shape and out.dtype == value.dtype, _OP, f"{name} must be {value.dtype} {tuple(value.shape)}, got {out.dtype} {tuple(out.shape)}")  # fmt: skip
        out.copy_(value)
    return q_out0, kv_cache_out0, q_out1, kv_cache_out1
