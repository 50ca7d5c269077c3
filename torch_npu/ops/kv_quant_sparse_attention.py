"""npu_kv_quant_sparse_flash_attention: npu_sparse_flash_attention over a per-token-head-tile quantised MLA
cache (KvQuantSparseFlashAttention, DeepSeek V3.2 inference).

query [.., N1, nope + rope] (float16 / bfloat16, q_nope and q_rope concatenated); key (= value, attention_mode 2:
one MLA cache) int8 rows of D = nope + 2 * rope + 4 * nope / tile_size bytes, combined (quant_scale_repo_mode 1):
    [ nope int8 codes | rope in query's dtype (2 bytes each) | nope / tile_size float32 scales (4 bytes each) ]
(nope codes may be float8_e4m3fn or HiFloat8 with key_dtype / value_dtype). Each token's nope part is dequantised
per tile of tile_size values (key_quant_mode = value_quant_mode = 2, per tile), the key is [nope | rope] and the
value its nope part; the attention is npu_sparse_flash_attention's (layouts, paged caches, sparse_indices,
sparse_block_size, sparse_mode) on those, in float32. Returns attention_out [.., N1, nope] in query's dtype.
"""

import torch

from torch_npu._c_children import DTypeNumber
from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op
from torch_npu.utils import hifloat8

__all__ = []

_OP = "npu_kv_quant_sparse_flash_attention"
_BIG = 9223372036854775807


def _split(cache, query, tile_size, rope_head_dim, codes_dtype):
    """(nope float32 dequantised [.., nope], rope float32 [.., rope]) of the combined cache rows."""
    width = cache.shape[-1]
    nope = (width - 2 * rope_head_dim) * tile_size // (tile_size + 4)
    check(nope > 0 and nope % tile_size == 0 and nope + 2 * rope_head_dim + 4 * (nope // tile_size) == width, _OP,
          f"key's last dim {width} is not nope + 2 * {rope_head_dim} + 4 * nope / {tile_size} for any nope")  # fmt: skip
    raw = cache.contiguous().view(torch.uint8)
    codes = raw[..., :nope]
    if codes_dtype is not None and int(codes_dtype) == DTypeNumber.hifloat8:
        values = hifloat8.decode(codes)
    elif codes_dtype is not None and int(codes_dtype) in (24, 292):
        values = codes.contiguous().view(torch.float8_e4m3fn).float()
    else:
        values = codes.contiguous().view(torch.int8).float()
    rope = raw[..., nope : nope + 2 * rope_head_dim].contiguous().view(query.dtype).float()
    scales = raw[..., nope + 2 * rope_head_dim :].contiguous().view(torch.float32)
    return values * scales.repeat_interleave(tile_size, -1), rope


def _fake(query, key, value, sparse_indices, scale_value, key_quant_mode, value_quant_mode, *, tile_size=128,
          rope_head_dim=64, **kwargs):  # fmt: skip
    nope = (key.shape[-1] - 2 * rope_head_dim) * tile_size // (tile_size + 4)
    return query.new_empty(*query.shape[:-1], nope)


@npu_op(
    "npu_kv_quant_sparse_flash_attention(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, "
    "float scale_value, int key_quant_mode, int value_quant_mode, *, Tensor? key_dequant_scale=None, "
    "Tensor? value_dequant_scale=None, Tensor? block_table=None, Tensor? actual_seq_lengths_query=None, "
    'Tensor? actual_seq_lengths_kv=None, int sparse_block_size=1, str layout_query="BSND", str layout_kv="BSND", '
    "int sparse_mode=3, int pre_tokens=9223372036854775807, int next_tokens=9223372036854775807, "
    "int attention_mode=0, int quant_scale_repo_mode=1, int tile_size=128, int rope_head_dim=64, "
    "int? key_dtype=None, int? value_dtype=None, Tensor? sinks=None) -> Tensor",
    fake=_fake,
)
def npu_kv_quant_sparse_flash_attention(query, key, value, sparse_indices, scale_value, key_quant_mode,
                                        value_quant_mode, *, key_dequant_scale=None, value_dequant_scale=None,
                                        block_table=None, actual_seq_lengths_query=None, actual_seq_lengths_kv=None,
                                        sparse_block_size=1, layout_query="BSND", layout_kv="BSND", sparse_mode=3,
                                        pre_tokens=_BIG, next_tokens=_BIG, attention_mode=0, quant_scale_repo_mode=1,
                                        tile_size=128, rope_head_dim=64, key_dtype=None, value_dtype=None,
                                        sinks=None):  # fmt: skip
    """attention_out [.., N1, nope]."""
    check(key_quant_mode == 2 and value_quant_mode == 2, _OP, f"key_quant_mode and value_quant_mode only support 2 (per tile), got {key_quant_mode} and {value_quant_mode}")  # fmt: skip
    check(quant_scale_repo_mode == 1, _OP, f"quant_scale_repo_mode only supports 1 (combined), got {quant_scale_repo_mode}")  # fmt: skip
    check(key_dequant_scale is None and value_dequant_scale is None, _OP, "key_dequant_scale / value_dequant_scale are reserved and must be None")  # fmt: skip
    check(query.dtype in (torch.float16, torch.bfloat16), _OP, f"query must be float16 or bfloat16, got {query.dtype}")
    check(key.element_size() == 1 and value.element_size() == 1, _OP, "key and value must be 8-bit combined caches")
    k_nope, k_rope = _split(key, query, tile_size, rope_head_dim, key_dtype)
    v_nope, _ = _split(value, query, tile_size, rope_head_dim, value_dtype)
    check(query.shape[-1] == k_nope.shape[-1] + rope_head_dim, _OP,
          f"query's last dim must be nope + rope = {k_nope.shape[-1] + rope_head_dim}, got {query.shape[-1]}")  # fmt: skip
    full_key = torch.cat([k_nope, k_rope], -1)
    out, _, _ = torch.ops.npu.npu_sparse_flash_attention(
        query, full_key, v_nope, sparse_indices, scale_value, block_table=block_table,
        actual_seq_lengths_query=actual_seq_lengths_query, actual_seq_lengths_kv=actual_seq_lengths_kv,
        sparse_block_size=sparse_block_size, layout_query=layout_query, layout_kv=layout_kv, sparse_mode=sparse_mode,
        sinks=sinks,
    )  # fmt: skip
    return out
