"""op-plugin's second-generation ATB attention operators, which torch_npu offers as torch_npu.atb.<name>: keyword
options, lengths as host integers (SymInt[]), an `out=` tensor that is also returned, and ALiBi masks.

_npu_paged_attention_v2 (decode over a paged KV cache; _npu_paged_attention_v2_get_workspace gives its workspace)
and _npu_flash_attention_v2 (prefill of sequences packed along the token axis) compute as their first versions
(torch_npu.ops.atb_attention). Their mask_type follows ATB's MaskType: the paged operator takes 0 (none) or 2
(ALiBi: mask [batch, num_heads, 1, max_len] or [batch, 1, max_len] added to the scaled scores); the flash
operator 1 (norm: [max_len, max_len] or [batch, max_len, max_len]) or 2 (ALiBi: [batch, num_heads, max_len,
max_len] or [num_heads, max_len, max_len]). The compressed ALiBi masks (4, 5, 6), which the card's kernel expands
from a 256 x 256 tile and per-head slopes, are refused: vnpu does not model that expansion."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.atb_attention import causal_prefix_prefill, packed_prefill, paged_decode
from torch_npu.ops.registration import npu_op

__all__ = []

_V2_ARGS = (
    "Tensor query, Tensor key_cache, Tensor block_table, SymInt[] context_lens, *, Tensor? value_cache=None, "
    "Tensor? mask=None, int num_kv_heads=0, int num_heads=0, float scale_value=1.0, int mask_type=0"
)
_ALIBI = 2  # PagedAttentionParam::MASK_TYPE_ALIBI


def _check_v2(value_cache, mask, mask_type, op):
    check(mask_type in (0, _ALIBI), op, f"mask_type must be 0 (no mask) or 2 (alibi), got {mask_type}")
    check(mask_type == 0 or mask is not None, op, "mask_type 2 (alibi) needs a mask")
    check(value_cache is not None, op, "value_cache is required: vnpu reads values from their own cache")


@npu_op(
    f"atb::_npu_paged_attention_v2.out({_V2_ARGS}, Tensor? workspace=None, Tensor(a!) out) -> Tensor(a!)",
    fake=lambda *args, out, **kwargs: out,
)
def _npu_paged_attention_v2(
    query, key_cache, block_table, context_lens, *, value_cache=None, mask=None, num_kv_heads=0, num_heads=0,
    scale_value=1.0, mask_type=0, workspace=None, out,
):  # fmt: skip
    """_npu_paged_attention with the lengths as host integers, keyword options and an ALiBi mask (mask_type 2):
    mask [batch, num_heads, 1, max_len] or [batch, 1, max_len] added to the scaled scores; returns out."""
    op = "_npu_paged_attention_v2"
    _check_v2(value_cache, mask, mask_type, op)
    lengths = torch.tensor(list(context_lens), dtype=torch.int32)
    bias = mask if mask_type == _ALIBI else None
    args = (query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table, lengths, out, op)
    paged_decode(*args, bias=bias)
    return out


@npu_op(f"atb::_npu_paged_attention_v2_get_workspace({_V2_ARGS}, Tensor(a!) out) -> Tensor")
def _npu_paged_attention_v2_get_workspace(query, *args, **kwargs):
    """The workspace of _npu_paged_attention_v2: empty on vnpu (see _npu_paged_attention_get_workspace)."""
    return torch.empty(0, dtype=torch.uint8, device=query.device)


_NORM = 1  # SelfAttentionParam::MASK_TYPE_NORM
_COMPRESSED_ALIBI = ": the compressed ALiBi masks are expanded by the card's kernel, which vnpu does not model"


def _check_kernel_type(kernel_type, op):
    check(kernel_type in (0, 1), op, f"kernel_type must be 0 (default) or 1 (high precision), got {kernel_type}")


@npu_op(
    "atb::_npu_flash_attention_v2.out(Tensor query, Tensor key, Tensor value, SymInt[] seq_len, *, Tensor? mask=None, "
    "Tensor? slopes=None, int kernel_type=0, int mask_type=2, float scale_value=1, int num_heads=0, "
    "int num_kv_heads=0, Tensor(a!) out) -> Tensor(a!)",
    fake=lambda *args, out, **kwargs: out,
)
def _npu_flash_attention_v2(
    query, key, value, seq_len, *, mask=None, slopes=None, kernel_type=0, mask_type=2, scale_value=1.0, num_heads=0,
    num_kv_heads=0, out,
):  # fmt: skip
    """_npu_flash_attention with keyword options: query [tokens, num_heads(, D)], key / value [tokens,
    num_kv_heads(, D)] (heads may be flattened into the last dim), the mask added to each sequence's scores as
    mask_type says; returns out."""
    op = "_npu_flash_attention_v2"
    check(mask_type in (_NORM, _ALIBI), op, f"mask_type must be 1 (norm) or 2 (alibi), got {mask_type}{_COMPRESSED_ALIBI}")  # fmt: skip
    check(mask is not None, op, f"mask_type {mask_type} needs a mask")
    _check_kernel_type(kernel_type, op)
    tokens = query.shape[0]
    heads = (query.view(tokens, num_heads, -1), key.view(tokens, num_kv_heads, -1), value.view(tokens, num_kv_heads, -1))  # fmt: skip
    per_head = mask_type == _ALIBI

    def bias_of(index, length):
        batched = mask.dim() == (4 if per_head else 3)
        sequence_mask = mask[index] if batched else mask
        return sequence_mask[..., :length, :length]

    lengths = torch.tensor(list(seq_len), dtype=torch.int32)
    packed_prefill(*heads, lengths, scale_value, num_heads, num_kv_heads, out.view(tokens, num_heads, -1), op, bias_of)
    return out


_NORM_COMPRESS = 3  # SelfAttentionParam::MASK_TYPE_NORM_COMPRESS


@npu_op(
    "atb::_npu_flash_attention_prefix_v2.out(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, "
    "Tensor mask, SymInt[] seq_len, SymInt[] context_lens, *, Tensor? slopes=None, int kernel_type=1, "
    "int mask_type=3, int num_kv_heads=0, int num_heads=0, float scale_value=1, Tensor(a!) out) -> Tensor(a!)",
    fake=lambda *args, out, **kwargs: out,
)
def _npu_flash_attention_prefix_v2(
    query, key_cache, value_cache, block_table, mask, seq_len, context_lens, *, slopes=None, kernel_type=1,
    mask_type=3, num_kv_heads=0, num_heads=0, scale_value=1.0, out,
):  # fmt: skip
    """_npu_flash_attention_qlens with host lengths and keyword options: each sequence's seq_len[i] new tokens
    attend causally to its first context_lens[i] cache rows (mask_type 3, ATB's compressed causal mask); returns
    out."""
    op = "_npu_flash_attention_prefix_v2"
    check(mask_type == _NORM_COMPRESS, op, f"mask_type must be 3 (compressed causal mask), got {mask_type}{_COMPRESSED_ALIBI}")  # fmt: skip
    _check_kernel_type(kernel_type, op)
    lengths = [torch.tensor(list(values), dtype=torch.int32) for values in (seq_len, context_lens)]
    args = (query, key_cache, value_cache, block_table, *lengths, num_kv_heads, num_heads, scale_value, out, op)
    causal_prefix_prefill(*args)
    return out


_PREFIX_MASKS = {"mask_type_norm_compress": 3, "mask_type_alibi_compress": 4, "mask_type_alibi_compress_sort": 5, "mask_type_causal_mask": 9}  # fmt: skip
_PREFIX_ARGS = (
    "Tensor query, Tensor key, Tensor value, Tensor block_tables, SymInt[] seqlen, SymInt[] kv_seqlen, int q_headnum, "
    "float qk_scale, int kv_headnum, *, Tensor? mask=None, Tensor? slopes=None, str? mask_type=None"
)


def _prefix_encoder(query, key, value, block_tables, seqlen, kv_seqlen, q_headnum, qk_scale, kv_headnum, mask_type,
                    output):  # fmt: skip
    op = "npu_self_attention_prefix_encoder"
    mode = "mask_type_causal_mask" if mask_type is None else mask_type
    check(mode in _PREFIX_MASKS, op, f"Unsupported mask_type value: '{mode}'")
    check(_PREFIX_MASKS[mode] in (3, 9), op, f"mask_type '{mode}' is a compressed ALiBi mask, which the card's kernel expands and vnpu does not model")  # fmt: skip
    tokens = query.shape[0]
    caches = [cache.reshape(*cache.shape[:2], kv_headnum, -1) for cache in (key, value)]
    lengths = [torch.tensor(list(values), dtype=torch.int32) for values in (seqlen, kv_seqlen)]
    out = output.view(tokens, q_headnum, -1)
    causal_prefix_prefill(query.reshape(tokens, q_headnum, -1), *caches, block_tables, *lengths, kv_headnum, q_headnum, qk_scale, out, op)  # fmt: skip
    return output


@npu_op(
    f"atb::npu_self_attention_prefix_encoder({_PREFIX_ARGS}) -> Tensor",
    fake=lambda query, *a, **k: torch.empty_like(query),
)
def npu_self_attention_prefix_encoder(query, key, value, block_tables, seqlen, kv_seqlen, q_headnum, qk_scale,
                                      kv_headnum, *, mask=None, slopes=None, mask_type=None):  # fmt: skip
    """Prefill with a prefix cache (as _npu_flash_attention_qlens; the causal rule of mask_type_causal_mask or the
    compressed causal mask): query [tokens, q_headnum(, D)], key / value paged caches [blocks, 128, kv_headnum(, D)];
    the output has the query's shape."""
    output = torch.empty_like(query)
    return _prefix_encoder(query, key, value, block_tables, seqlen, kv_seqlen, q_headnum, qk_scale, kv_headnum,
                           mask_type, output)  # fmt: skip


@npu_op(
    f"atb::npu_self_attention_prefix_encoder.out({_PREFIX_ARGS}, Tensor(a!) output) -> Tensor(a!)",
    fake=lambda *args, output, **kwargs: output,
)
def npu_self_attention_prefix_encoder_out(query, key, value, block_tables, seqlen, kv_seqlen, q_headnum, qk_scale,
                                          kv_headnum, *, mask=None, slopes=None, mask_type=None, output):  # fmt: skip
    return _prefix_encoder(query, key, value, block_tables, seqlen, kv_seqlen, q_headnum, qk_scale, kv_headnum,
                           mask_type, output)  # fmt: skip
