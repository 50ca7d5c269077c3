"""torch_npu.atb.npu_multi_head_latent_attention: op-plugin's ATB attention of DeepSeek-style multi-head latent
attention over paged caches, with the query and the cache each split in two: q_nope [tokens, heads, 512] against
the compressed latent ctkv, q_rope [tokens, heads, 64] against the rotary key k_rope. Keys are ctkv ‖ k_rope, values
ctkv; the output [tokens, heads, 512] has q_rope's dtype. Scores, softmax and p·v compute as the other ATB attention
operators (torch_npu.ops.atb_attention).

calc_type: "calc_type_undefined" (decode: one query token per sequence), "calc_type_ring" (the same, also giving
each head's log-sum-exp of its scaled scores [tokens, heads, 1], which ring attention merges across chunks) or
"calc_type_spec" (speculative decoding: qseqlen[i] query tokens per sequence, the last of its context; with
mask_type "mask_type_spec" they attend causally). cache_mode: "krope_ctkv" (ND caches [blocks, block_size,
kv_heads, D]) or "nzcache" (the same values in FRACTAL_NZ, [blocks, kv_heads * D / 16, block_size, 16]).
"int8_nzcache" (int8 latents with per-head descales) and "mask_type_free" are refused: vnpu does not model them.

torch_npu.atb.npu_ring_mla is one step of ring attention (context parallelism) for MLA prefill over packed
sequences: each step attends to one chunk of keys and merges the result into the previous steps' output through
their log-sum-exp, so that the ring over all chunks equals attention over the whole sequence."""

import torch

from torch_npu.ops._common import check, require
from torch_npu.ops.atb_attention import causal_over_context, decode_rows, prefill_rows, sequence_rows
from torch_npu.ops.atb_paged_cache import cache_rows
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_multi_head_latent_attention"
_MASKS = ("undefined", "mask_type_spec", "mask_type_free")
_CALCS = ("calc_type_undefined", "calc_type_spec", "calc_type_ring")
_CACHES = ("krope_ctkv", "int8_nzcache", "nzcache")


def op_mode(op, value, default, known, name):
    """An ATB operator's string option: the default for None, refused when unknown (op-plugin's message)."""
    mode = default if value is None else value
    check(mode in known, op, f"Unsupported {name} value: '{mode}'")
    return mode


def _rows(ctkv, k_rope, block_tables, kv_heads):
    """Each sequence's cache rows: (keys ctkv ‖ k_rope, values ctkv), [batch, L, kv_heads, D] in float32."""
    latent, rope = sequence_rows(cache_rows(ctkv), cache_rows(k_rope), block_tables)
    latent = latent.reshape(*latent.shape[:2], kv_heads, -1).float()
    rope = rope.reshape(*rope.shape[:2], kv_heads, -1).float()
    return torch.cat([latent, rope], dim=-1), latent


def _attention(
    q_nope, q_rope, ctkv, k_rope, block_tables, context_lens, q_headnum, qk_scale, kv_headnum, *, mask=None,
    qseqlen=None, qk_descale=None, pv_descale=None, mask_type=None, calc_type=None, cache_mode=None, output,
):  # fmt: skip
    """Writes output; returns the log-sum-exp [tokens, heads, 1] (float32) for calc_type_ring, else None."""
    mask_mode = op_mode(_OP, mask_type, "undefined", _MASKS, "mask_type")
    calc = op_mode(_OP, calc_type, "calc_type_undefined", _CALCS, "calc_type")
    cache = op_mode(_OP, cache_mode, "krope_ctkv", _CACHES, "cache_mode")
    check(cache != "int8_nzcache", _OP, "cache_mode 'int8_nzcache' (int8 latents with per-head descales) is not modelled by vnpu")  # fmt: skip
    check(mask_mode != "mask_type_free", _OP, "mask_type 'mask_type_free' is not modelled by vnpu")
    check(q_nope.dim() == 3 and q_nope.shape[1] == q_headnum, _OP, f"q_nope must be [tokens, {q_headnum}, head_size]")
    query = torch.cat([q_nope, q_rope], dim=-1).to(q_rope.dtype)
    keys, values = _rows(ctkv, k_rope, block_tables, kv_headnum)
    contexts = [int(n) for n in context_lens]
    if calc != "calc_type_spec":
        check(query.shape[0] == len(contexts), _OP, f"{len(contexts)} context_lens for {query.shape[0]} query tokens")
        lengths = torch.tensor(contexts, dtype=torch.int32)
        lse = decode_rows(query, keys, values, lengths, kv_headnum, qk_scale, output, _OP)
        return lse if calc == "calc_type_ring" else None
    check(qseqlen is not None, _OP, "calc_type 'calc_type_spec' needs qseqlen")
    new_tokens = [int(n) for n in qseqlen]

    def unmasked(rows, length, context):
        return torch.zeros(length, context, device=query.device)

    bias_of = unmasked if mask_mode == "undefined" else causal_over_context(query.device)
    prefill_rows(_OP, bias_of, query, keys, values, new_tokens, contexts, kv_headnum, qk_scale, output)
    return None


_ARGS = (
    "Tensor q_nope, Tensor q_rope, Tensor ctkv, Tensor k_rope, Tensor block_tables, SymInt[] context_lens, "
    "int q_headnum, float qk_scale, int kv_headnum"
)
_OPTIONS = (
    "Tensor? mask=None, SymInt[]? qseqlen=None, Tensor? qk_descale=None, Tensor? pv_descale=None, "
    "str? mask_type=None, str? calc_type=None, str? cache_mode=None"
)


def _output(q_nope, q_rope):
    return q_rope.new_empty(q_nope.shape)


@npu_op(f"atb::npu_multi_head_latent_attention({_ARGS}, *, {_OPTIONS}) -> Tensor", fake=lambda q_nope, q_rope, *a, **k: _output(q_nope, q_rope))  # fmt: skip
def npu_multi_head_latent_attention(q_nope, q_rope, *args, **options):
    """The attention output [tokens, heads, 512]."""
    output = _output(q_nope, q_rope)
    _attention(q_nope, q_rope, *args, **options, output=output)
    return output


@npu_op(
    f"atb::npu_multi_head_latent_attention.out({_ARGS}, *, {_OPTIONS}, Tensor(a!) output) -> Tensor(a!)",
    fake=lambda *args, output, **kwargs: output,
)
def npu_multi_head_latent_attention_out(q_nope, q_rope, *args, output, **options):
    _attention(q_nope, q_rope, *args, **options, output=output)
    return output


def _lse_tensor(lse, q_nope, q_rope, return_lse):
    if not return_lse:
        return q_rope.new_empty(0)
    return q_rope.new_empty(*q_nope.shape[:2], 1) if lse is None else lse.to(q_rope.dtype)


@npu_op(
    f"atb::npu_multi_head_latent_attention.lse({_ARGS}, bool return_lse, *, {_OPTIONS}) -> (Tensor, Tensor)",
    fake=lambda q_nope, q_rope, *a, **k: (_output(q_nope, q_rope), _lse_tensor(None, q_nope, q_rope, a[7])),
)
def npu_multi_head_latent_attention_lse(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens, q_headnum, qk_scale,
                                        kv_headnum, return_lse, **options):  # fmt: skip
    """(output, the log-sum-exp [tokens, heads, 1] of calc_type_ring when return_lse, else an empty tensor)."""
    output = _output(q_nope, q_rope)
    args = (ctkv, k_rope, block_tables, context_lens, q_headnum, qk_scale, kv_headnum)
    lse = _attention(q_nope, q_rope, *args, **options, output=output)
    return output, _lse_tensor(lse, q_nope, q_rope, return_lse)


@npu_op(
    f"atb::npu_multi_head_latent_attention.lse_out({_ARGS}, bool return_lse, *, {_OPTIONS}, Tensor(a!) output, "
    "Tensor(b!) lse) -> (Tensor(a!), Tensor(b!))",
    fake=lambda *args, output, lse, **kwargs: (output, lse),
)
def npu_multi_head_latent_attention_lse_out(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens, q_headnum,
                                            qk_scale, kv_headnum, return_lse, *, output, lse, **options):  # fmt: skip
    args = (ctkv, k_rope, block_tables, context_lens, q_headnum, qk_scale, kv_headnum)
    computed = _attention(q_nope, q_rope, *args, **options, output=output)
    if computed is not None:
        lse.copy_(computed.to(lse.dtype))
    return output, lse


_RING_OP = "npu_ring_mla"
_RING_MODES = {
    "kernel_type": ("kernel_type_high_precision", ("kernel_type_default", "kernel_type_high_precision")),
    "mask_type": ("no_mask", ("no_mask", "mask_type_triu")),
    "input_layout": ("type_bsnd", ("type_bsnd",)),
    "calc_type": ("calc_type_first_ring", ("calc_type_default", "calc_type_first_ring")),
}


def _ring_modes(options):
    modes = {}
    for name, (default, known) in _RING_MODES.items():
        mode = default if options.get(name) is None else options[name]
        check(mode in known, _RING_OP, f"Unsupported {name} value: '{mode}'")
        modes[name] = mode
    return modes


def _ring_chunk(q, k, v, kv_heads, scale, causal, p_dtype):
    """One sequence: q [S, N, D], k [T, KV, D], v [T, KV, Dv] (float32) -> (out [S, N, Dv], lse [N, S])."""
    grouped = q.unflatten(1, (kv_heads, -1))  # [S, KV, G, D]
    scores = torch.einsum("shgd,thd->hgst", grouped, k) * scale
    if causal:  # query i sees keys 0..i (the mask's top-left corner)
        later = torch.arange(k.shape[0], device=q.device)[None, :] > torch.arange(q.shape[0], device=q.device)[:, None]
        scores = scores.masked_fill(later, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # [KV, G, S]
    p = torch.softmax(scores, dim=-1)
    p = p if p_dtype is None else p.to(p_dtype).float()
    out = torch.einsum("hgst,thd->shgd", p, v).flatten(1, 2)
    return out, lse.flatten(0, 1)


def _ring(q_nope, q_rope, k_nope, k_rope, value, mask, seqlen, head_num, kv_head_num, output, softmax_lse, pre_out=None,
          prev_lse=None, qk_scale=1.0, **options):  # fmt: skip
    modes = _ring_modes(options)
    require(seqlen.device.type == "cpu", "Expected CPU tensor, please check whether the input seqlen tensor device is correct.")  # fmt: skip
    merge = modes["calc_type"] == "calc_type_default"
    check(not merge or (pre_out is not None and prev_lse is not None), _RING_OP, "calc_type 'calc_type_default' merges into pre_out and prev_lse, which are required")  # fmt: skip
    lengths = seqlen.tolist()
    q_lens, kv_lens = (lengths, lengths) if seqlen.dim() == 1 else lengths
    check(sum(q_lens) == q_nope.shape[0], _RING_OP, f"seqlen gives {sum(q_lens)} query tokens, q_nope has {q_nope.shape[0]}")  # fmt: skip
    q = torch.cat([q_nope, q_rope], dim=-1).float()
    k, v = torch.cat([k_nope, k_rope], dim=-1).float(), value.float()
    p_dtype = None if modes["kernel_type"] == "kernel_type_high_precision" else q_nope.dtype
    q_start = kv_start = 0
    for q_len, kv_len in zip(q_lens, kv_lens, strict=True):
        rows, keys = slice(q_start, q_start + q_len), slice(kv_start, kv_start + kv_len)
        causal = modes["mask_type"] == "mask_type_triu"
        out, lse = _ring_chunk(q[rows], k[keys], v[keys], kv_head_num, qk_scale, causal, p_dtype)
        if merge:  # the online-softmax update of ring attention
            previous = prev_lse[:, rows].float()
            merged = torch.logaddexp(previous, lse)
            out = pre_out[rows].float() * torch.exp(previous - merged).t()[..., None] + out * torch.exp(lse - merged).t()[..., None]  # fmt: skip
            lse = merged
        output[rows] = out.to(output.dtype)
        softmax_lse[:, rows] = lse.to(softmax_lse.dtype)
        q_start, kv_start = q_start + q_len, kv_start + kv_len
    return output, softmax_lse


_RING_ARGS = (
    "Tensor q_nope, Tensor q_rope, Tensor k_nope, Tensor k_rope, Tensor value, Tensor mask, Tensor seqlen, int head_num, "
    "int kv_head_num, *, Tensor? pre_out=None, Tensor? prev_lse=None, float qk_scale=1, str? kernel_type=None, "
    "str? mask_type=None, str? input_layout=None, str? calc_type=None"
)


def _ring_outputs(q_nope, value, head_num):
    tokens = q_nope.shape[0]
    return q_nope.new_empty(tokens, head_num, value.shape[2]), q_nope.new_empty(head_num, tokens, dtype=torch.float32)


@npu_op(
    f"atb::npu_ring_mla({_RING_ARGS}) -> (Tensor, Tensor)",
    fake=lambda q_nope, q_rope, k_nope, k_rope, value, mask, seqlen, head_num, *a, **k: _ring_outputs(
        q_nope, value, head_num
    ),  # fmt: skip
)
def npu_ring_mla(q_nope, q_rope, k_nope, k_rope, value, mask, seqlen, head_num, kv_head_num, **options):
    """One step of ring attention for MLA over packed sequences (seqlen [batch], or [2, batch] for query and key
    lengths, on the host): q = q_nope ‖ q_rope against k = k_nope ‖ k_rope and value; mask_type "mask_type_triu"
    lets query i see keys 0..i. calc_type "calc_type_first_ring" starts the ring; "calc_type_default" merges this
    chunk into pre_out / prev_lse (the online-softmax update). Returns (output [tokens, heads, Dv], softmax_lse
    [heads, tokens] float32); kernel_type_high_precision keeps the probabilities in float32."""
    output, softmax_lse = _ring_outputs(q_nope, value, head_num)
    return _ring(q_nope, q_rope, k_nope, k_rope, value, mask, seqlen, head_num, kv_head_num, output, softmax_lse, **options)  # fmt: skip


@npu_op(
    f"atb::npu_ring_mla.out({_RING_ARGS}, Tensor(a!) output, Tensor(b!) softmax_lse) -> (Tensor(a!), Tensor(b!))",
    fake=lambda *args, output, softmax_lse, **kwargs: (output, softmax_lse),
)
def npu_ring_mla_out(q_nope, q_rope, k_nope, k_rope, value, mask, seqlen, head_num, kv_head_num, *, output,
                     softmax_lse, **options):  # fmt: skip
    return _ring(q_nope, q_rope, k_nope, k_rope, value, mask, seqlen, head_num, kv_head_num, output, softmax_lse, **options)  # fmt: skip
