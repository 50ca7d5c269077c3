"""Rotary position embeddings: npu_rotary_mul, npu_apply_rotary_pos_emb, npu_interleave_rope,
npu_mrope.

rotate_half (rotary_mode 'half'): x = [x1, x2] halves of the last dim -> [-x2, x1].
'interleave': pairs (x[..., 0::2], x[..., 1::2]) -> (-x[..., 1::2], x[..., 0::2]) interleaved back.
'quarter' (npu_apply_rotary_pos_emb only): quarters [x1, x2, x3, x4] -> [-x2, x1, -x4, x3].
"""

import torch

from torch_npu.ops._common import check, require
from torch_npu.ops.dtype_support import FLOATS, INDEX_TYPES
from torch_npu.ops.registration import npu_op

__all__ = []


def rotate(x, mode, op):
    check(
        mode in ("half", "interleave", "quarter"),
        op,
        f"rotary_mode must be 'half', 'interleave' or 'quarter', got {mode!r}",
    )
    if mode == "half":
        x1, x2 = x.chunk(2, -1)
        return torch.cat((-x2, x1), dim=-1)
    if mode == "quarter":
        x1, x2, x3, x4 = x.chunk(4, -1)
        return torch.cat((-x2, x1, -x4, x3), dim=-1)
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


@npu_op(
    "npu_rotary_mul(Tensor self, Tensor r1, Tensor r2, str rotary_mode='half', Tensor? rotate=None) -> Tensor",
    differentiable=True,
    dtypes={"self": FLOATS, "r1": FLOATS, "r2": FLOATS},
    api="aclnnRotaryPositionEmbedding",
)
def npu_rotary_mul(x, r1, r2, rotary_mode="half", rotate_matrix=None):
    """x * r1 + rotate(x) * r2 (r1, r2 broadcast to x; `rotate` given: rotate(x) = x @ rotate)."""
    require(
        rotary_mode in ("half", "interleave"),
        f"The rotary_mode of npu_rotary_mul should be half or interleave, but got {rotary_mode}",
    )
    check(x.dim() in (3, 4), "npu_rotary_mul", f"self must be 3-D or 4-D, got {x.dim()}-D")
    check(x.shape[-1] % 2 == 0, "npu_rotary_mul", f"the last dim ({x.shape[-1]}) must be even")
    rotated = x @ rotate_matrix if rotate_matrix is not None else rotate(x, rotary_mode, "npu_rotary_mul")
    return x * r1 + rotated * r2


def _apply_rope(query, key, cos, sin, layout, rotary_mode):
    # op-plugin reads 'BNSD', 'SBND' and 'TND'; any other layout string ('BSND', the older 'BSH') is BSND.
    require(
        rotary_mode in ("half", "quarter", "interleave"),
        f"The layout should be half/quarter/interleave, but got {rotary_mode}",
    )
    read_as = layout if layout in ("BNSD", "SBND", "TND") else "BSND"
    rank = 3 if read_as == "TND" else 4
    for name, t in (("query", query), ("key", key), ("cos", cos), ("sin", sin)):
        check(
            t.dim() == rank,
            "npu_apply_rotary_pos_emb",
            f"{name} must be {rank}-D for layout {layout} (read as {read_as}), got {t.dim()}-D",
        )
    q = query * cos + rotate(query, rotary_mode, "npu_apply_rotary_pos_emb") * sin
    k = key * cos + rotate(key, rotary_mode, "npu_apply_rotary_pos_emb") * sin
    return q.to(query.dtype), k.to(key.dtype)


def _apply_rope_kernel(query, key, cos, sin, layout="BSND", rotary_mode="half"):
    """RoPE on query and key (cos/sin have one head and broadcast over heads). Like the NPU kernel,
    the results are written into query and key as well as returned."""
    q, k = _apply_rope(query, key, cos, sin, layout, rotary_mode)
    with torch.no_grad():
        query.copy_(q)
        key.copy_(k)
    return q, k


def _apply_rope_fake(query, key, cos, sin, layout="BSND", rotary_mode="half"):
    return _apply_rope(query, key, cos, sin, layout, rotary_mode)


npu_op(
    "npu_apply_rotary_pos_emb(Tensor query, Tensor key, Tensor cos, Tensor sin, str layout='BSND', "
    "str rotary_mode='half') -> (Tensor, Tensor)",
    fake=_apply_rope_fake,
)(_apply_rope_kernel)


@npu_op(
    "npu_interleave_rope(Tensor x, Tensor cos, Tensor sin) -> Tensor",
    dtypes={"x": FLOATS, "cos": FLOATS, "sin": FLOATS},
    api="aclnnInterleaveRope",
)
def npu_interleave_rope(x, cos, sin):
    """DeepSeek-style RoPE on x [B, N, S, D]: de-interleave the last dim (x[..., 0::2] then x[..., 1::2]),
    then x * cos + rotate_half(x) * sin (cos, sin [B, 1, S, D]). 16-bit inputs are computed in float32 and
    rounded once, as op-plugin's reference does."""
    check(x.dim() == 4, "npu_interleave_rope", f"x must be 4-D [B, N, S, D], got {x.dim()}-D")
    xf, cos, sin = x.float(), cos.float(), sin.float()
    deinterleaved = torch.cat((xf[..., 0::2], xf[..., 1::2]), dim=-1)
    return (deinterleaved * cos + rotate(deinterleaved, "half", "npu_interleave_rope") * sin).to(x.dtype)


def _mrope_cos_sin(positions, cos_sin_cache, mrope_section, cache_mode, op):
    """cos and sin [T, rotary_dim / 2] of each token. With [3, T] positions (temporal, height, width), each
    channel takes its row: 'default' in consecutive sections (mrope_section channels from each row in turn),
    'interleave' in turn (channel c from height when c % 3 == 1 and c < 3 * sections[1], from width when
    c % 3 == 2 and c < 3 * sections[2], else temporal; Qwen3-VL's layout)."""
    cos, sin = cos_sin_cache[positions].chunk(2, dim=-1)
    if positions.dim() == 1:
        return cos, sin
    check(
        positions.dim() == 2 and positions.shape[0] == 3 and mrope_section is not None,
        op,
        "2-D positions must be [3, T] (temporal, height, width) with mrope_section",
    )
    check(
        sum(mrope_section) == cos.shape[-1],
        op,
        f"mrope_section {list(mrope_section)} must sum to rotary_dim / 2 = {cos.shape[-1]}",
    )
    if cache_mode == "interleave":
        row = torch.zeros(cos.shape[-1], dtype=torch.long)
        row[1 : 3 * mrope_section[1] : 3] = 1
        row[2 : 3 * mrope_section[2] : 3] = 2
        pick = row.to(cos.device).view(1, 1, -1).expand(1, *cos.shape[1:])
        return cos.gather(0, pick)[0], sin.gather(0, pick)[0]
    cos = torch.cat([c[i] for i, c in enumerate(cos.split(list(mrope_section), dim=-1))], dim=-1)
    sin = torch.cat([s[i] for i, s in enumerate(sin.split(list(mrope_section), dim=-1))], dim=-1)
    return cos, sin


def rope_tokens(x, cos, sin, head_size, rotary_mode):
    """The rotation in float32 for 16-bit inputs, rounded once to x's dtype (as the card computes it)."""
    tokens = x.shape[0]
    heads = x.view(tokens, -1, head_size)
    if x.element_size() < 4:
        heads, cos, sin = heads.float(), cos.float(), sin.float()
    rot_dim = cos.shape[-1] * 2
    rot, rest = heads[..., :rot_dim], heads[..., rot_dim:]
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    if rotary_mode == "half":
        x1, x2 = rot.chunk(2, -1)
        out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    return torch.cat((out, rest), dim=-1).reshape(x.shape).to(x.dtype)


@npu_op(
    "npu_mrope(Tensor positions, Tensor query, Tensor key, Tensor cos_sin_cache, int head_size, *, "
    "int[]? mrope_section=None, str? rotary_mode='half', str? cache_mode='default') -> (Tensor, Tensor)",
    dtypes={"positions": INDEX_TYPES, "query": FLOATS, "key": FLOATS, "cos_sin_cache": FLOATS},
    api="aclnnRopeWithSinCosCache",
)
def npu_mrope(
    positions, query, key, cos_sin_cache, head_size, *, mrope_section=None, rotary_mode="half", cache_mode="default"
):
    """vLLM's (multimodal) rotary embedding: cos_sin_cache [max_position, rotary_dim] holds cos then sin;
    positions [T] (or [3, T] with mrope_section for Qwen2-VL); query [T, Nq * head_size], key
    [T, Nk * head_size]; the first rotary_dim channels of each head rotate ('half' = NeoX style,
    'interleave' = GPT-J style), the rest pass through; 16-bit inputs rotate in float32 and round once.
    cache_mode ('default' / 'interleave') is how [3, T] positions share the channels (see _mrope_cos_sin).
    Returns (query, key)."""
    op = "npu_mrope"
    check(rotary_mode in ("half", "interleave"), op, f"rotary_mode must be 'half' or 'interleave', got {rotary_mode!r}")
    check(
        cache_mode in ("default", "interleave"),
        op,
        f"cache_mode only support default or interleave, got {cache_mode!r}",
    )
    check(
        query.shape[-1] % head_size == 0 and key.shape[-1] % head_size == 0,
        op,
        f"head_size={head_size} must divide query ({query.shape[-1]}) and key ({key.shape[-1]}) widths",
    )
    check(cos_sin_cache.shape[-1] <= head_size, op, "rotary_dim (cos_sin_cache.shape[-1]) exceeds head_size")
    cos, sin = _mrope_cos_sin(positions, cos_sin_cache, mrope_section, cache_mode, op)
    return (rope_tokens(query, cos, sin, head_size, rotary_mode), rope_tokens(key, cos, sin, head_size, rotary_mode))
