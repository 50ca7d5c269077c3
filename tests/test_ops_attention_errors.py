"""torch_npu's attention operators refuse invalid arguments with the exact first line of their error and
torch_npu's ERR01001 (OPS invalid parameter) code."""

import pytest
import torch
from error_cases import raises_operator_error, t

import torch_npu


def int8_kv_attention(**antiquant):
    """npu_fused_infer_attention_score on one query token over an int8 key / value cache of 2 tokens."""
    kv = t(1, 2, 8).to(torch.int8)
    return torch_npu.npu_fused_infer_attention_score(t(1, 1, 8), kv, kv, **{"value_antiquant_scale": t(8), **antiquant})


# Invalid arguments: the exact first line, and torch_npu's ERR01001 (OPS invalid parameter) code
INVALID_ARGUMENT_ERRORS = [
    (
        lambda: torch_npu.npu_fusion_attention(t(1, 2, 4, 8), t(1, 2, 4, 8), t(1, 2, 4, 8), 2, "BNSD", sparse_mode=9),
        "npu_fusion_attention: sparse_mode must be in 0..8, got 9",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(t(1, 2, 4, 8), t(1, 2, 4, 4), t(1, 2, 4, 4), 2, "BNSD"),
        "npu_fusion_attention: query and key head sizes differ (8 vs 4)",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(t(1, 2, 4, 8), t(2, 2, 4, 8), t(2, 2, 4, 8), 2, "BNSD"),
        "npu_fusion_attention: query and key batch sizes differ (1 vs 2)",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(t(1, 3, 4, 8), t(1, 2, 4, 8), t(1, 2, 4, 8), 3, "BNSD"),
        "npu_fusion_attention: the query's 3 heads must be a multiple of the key/value heads (2)",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(t(1, 2, 4, 8), t(1, 2, 4, 8), t(1, 2, 4, 8), 0, "BNSD"),
        "npu_fusion_attention: head_num must be positive, got 0",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(
            t(1, 2, 4, 8), t(1, 2, 4, 8), t(1, 2, 4, 8), 2, "BNSD", atten_mask=t(3, 3) > 0
        ),
        "npu_fusion_attention: atten_mask must end in [S1, S2] = [4, 4], got (1, 1, 3, 3)",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(t(5, 2, 8), t(5, 2, 8), t(5, 2, 8), 2, "TND"),
        "npu_fusion_attention: layout TND needs actual_seq_qlen (cumulative lengths)",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(
            t(5, 2, 8), t(5, 2, 8), t(5, 2, 8), 2, "TND", actual_seq_qlen=[2, 5], actual_seq_kvlen=[5]
        ),
        "npu_fusion_attention: actual_seq_qlen and actual_seq_kvlen must list as many sequences",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(
            t(5, 2, 8), t(5, 2, 8), t(5, 2, 8), 2, "TND", actual_seq_qlen=[2, 4], actual_seq_kvlen=[2, 4]
        ),
        "npu_fusion_attention: the sequence lengths cover 4 / 4 tokens, query/key hold 5 / 5",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(
            t(5, 3, 8), t(5, 2, 8), t(5, 2, 8), 2, "TND", actual_seq_qlen=[5], actual_seq_kvlen=[5]
        ),
        "npu_fusion_attention: TND query must be [T, 2, D], got (5, 3, 8)",
    ),
    (
        lambda: torch_npu.npu_prompt_flash_attention(t(1, 2, 8), t(1, 2, 8), t(1, 2, 8), num_heads=0),
        "npu_prompt_flash_attention: num_heads must be positive, got 0",
    ),
    (
        lambda: torch_npu.npu_prompt_flash_attention(t(1, 2, 8), t(1, 2, 8), t(1, 2, 8), input_layout="XYZ"),
        "npu_prompt_flash_attention: input_layout 'XYZ' is not supported",
    ),
    (
        lambda: torch_npu.npu_prompt_flash_attention(
            t(1, 2, 8), t(1, 2, 8), t(1, 2, 8), num_heads=2, num_key_value_heads=3
        ),
        "npu_prompt_flash_attention: num_key_value_heads=3 must divide num_heads=2",
    ),
    (  # Q.K^T over heads of different widths (the value's may be narrower)
        lambda: torch_npu.npu_prompt_flash_attention(
            t(1, 2, 4, 8), t(1, 2, 4, 4), t(1, 2, 4, 4), num_heads=2, input_layout="BNSD"
        ),
        "npu_prompt_flash_attention: query and key head sizes differ (8 vs 4)",
    ),
    (
        lambda: torch_npu.npu_incre_flash_attention(t(1, 1, 16), t(1, 3, 8), t(1, 3, 8), num_heads=2),
        "npu_incre_flash_attention: query and key head sizes differ (8 vs 4)",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(
            t(4, 2, 8),
            t(6, 2, 4),
            t(6, 2, 4),
            num_heads=2,
            input_layout="TND",
            actual_seq_lengths=[4],
            actual_seq_lengths_kv=[6],
        ),
        "npu_fused_infer_attention_score: query and key head sizes differ (8 vs 4)",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score_v2(
            t(1, 2, 4, 8), t(1, 2, 4, 4), t(1, 2, 4, 4), num_query_heads=2, input_layout="BNSD"
        ),
        "npu_fused_infer_attention_score_v2: query and key head sizes differ (8 vs 4)",
    ),
    (
        lambda: torch_npu.npu_incre_flash_attention(
            t(2, 1, 8), t(4, 2, 8), t(4, 2, 8), block_table=t(1, 2).int(), block_size=2
        ),
        "npu_incre_flash_attention: block_table must be [B=2, max_blocks], got (1, 2)",
    ),
    (
        lambda: torch_npu.npu_incre_flash_attention(
            t(2, 1, 8), t(4, 3, 8), t(4, 3, 8), block_table=t(2, 2).int(), block_size=2
        ),
        "npu_incre_flash_attention: paged key/value must be (blocknum, block_size=2, H), (blocknum, KV_N, "
        "block_size=2, D) or NZ (blocknum, KV_N, D/16, block_size=2, 16), got (4, 3, 8)",
    ),
    (  # vnpu's earlier reading of a 4-D cache, (blocknum, block_size, KV_N, D), is not one of the card's layouts
        lambda: torch_npu.npu_incre_flash_attention(
            t(2, 1, 8), t(4, 2, 1, 8), t(4, 2, 1, 8), block_table=t(2, 2).int(), block_size=2
        ),
        "npu_incre_flash_attention: paged key/value must be (blocknum, block_size=2, H), (blocknum, KV_N, "
        "block_size=2, D) or NZ (blocknum, KV_N, D/16, block_size=2, 16), got (4, 2, 1, 8)",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(
            t(1, 1, 12),
            t(4, 2, 12),
            t(4, 2, 8),
            query_rope=t(1, 1, 6),
            key_rope=t(4, 2, 4),
            num_heads=4,
            block_table=t(1, 2).int(),
            block_size=2,
        ),
        "npu_fused_infer_attention_score: query_rope's hidden size 6 is not divisible by 4 heads",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score_v2(
            t(1, 2, 3, 8),
            t(2, 3, 8),
            t(2, 3, 8),
            num_query_heads=2,
            input_layout="NTD_TND",
            actual_seq_qlen=[3],
            actual_seq_kvlen=[3],
        ),
        "npu_fused_infer_attention_score_v2: query must be 3-D for layout NTD, got 4-D",
    ),
    (  # a BnBsH cache whose hidden size does not split into the key/value heads, read for layout TND
        lambda: torch_npu.npu_fused_infer_attention_score_v2(
            t(3, 4, 8),
            t(2, 2, 10),
            t(2, 2, 10),
            num_query_heads=4,
            input_layout="TND",
            actual_seq_qlen=[3],
            actual_seq_kvlen=[3],
            block_table=t(1, 2).int(),
            block_size=2,
        ),
        "npu_fused_infer_attention_score_v2: key's hidden size 10 is not divisible by 4 heads",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(
            t(5, 2, 8), t(5, 2, 8), t(5, 2, 8), num_heads=2, input_layout="TND"
        ),
        "npu_fused_infer_attention_score: layout TND needs actual_seq_lengths and actual_seq_lengths_kv",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(t(1, 2, 8), t(1, 2, 8), t(1, 2, 8), query_rope=t(1, 2, 4)),
        "npu_fused_infer_attention_score: query_rope needs key_rope",
    ),
    (
        lambda: torch_npu.npu_prompt_flash_attention(t(1, 2, 8), t(1, 2, 8), t(1, 2, 8), quant_offset2=t(1)),
        "npu_prompt_flash_attention: quant_offset2 needs quant_scale2",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(
            t(2, 2, 8),
            t(2, 2, 8),
            t(2, 2, 8),
            num_heads=2,
            input_layout="TND",
            actual_seq_lengths=[2],
            actual_seq_lengths_kv=[2],
            dequant_scale1=t(1),
            quant_scale1=t(1),
            dequant_scale2=t(1),
        ),
        "npu_fused_infer_attention_score: int8 attention (dequant_scale1) with layout TND is not supported by vnpu",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(
            t(1, 1, 8), t(1, 2, 8), t(1, 2, 8), key_antiquant_scale=t(8), value_antiquant_scale=t(8)
        ),
        "npu_fused_infer_attention_score: antiquant needs an int8 key, got torch.float32",
    ),
    (
        lambda: int8_kv_attention(key_antiquant_scale=t(8), key_antiquant_mode=2),
        "npu_fused_infer_attention_score: key mode must be 0 (per channel) or 1 (per token), got 2",
    ),
    (
        lambda: int8_kv_attention(key_antiquant_scale=t(5)),
        "npu_fused_infer_attention_score: key antiquant scale must hold one value per channel (8), got 5",
    ),
    (
        lambda: int8_kv_attention(key_antiquant_scale=t(3), key_antiquant_mode=1),
        "npu_fused_infer_attention_score: key antiquant scale per token must be [B=1, S=2], got (3,)",
    ),
]


@pytest.mark.parametrize("call,message", INVALID_ARGUMENT_ERRORS, ids=[c[1][:56] for c in INVALID_ARGUMENT_ERRORS])
def test_invalid_argument_error_message(call, message):
    raises_operator_error(call, message)
