"""npu_kv_quant_sparse_flash_attention against dense attention over the dequantised cache written out (int8 nope
codes times their per-tile float32 scales, the rope part in the query's dtype, the selected tokens only, the
right-down causal limit), in a paged (PA_BSND) and a BSND cache."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

B, S1, S2, N1, NOPE, ROPE, TILE, TOPK = 1, 3, 32, 4, 256, 16, 128, 6


def combined_cache(g):
    codes = torch.randint(-100, 100, (B, S2, 1, NOPE), generator=g, dtype=torch.int8)
    rope = torch.randn(B, S2, 1, ROPE, generator=g).to(torch.bfloat16)
    scales = torch.rand(B, S2, 1, NOPE // TILE, generator=g) / 50
    cache = torch.cat([codes, rope.view(torch.int8), scales.view(torch.int8)], -1)
    nope = codes.float() * scales.repeat_interleave(TILE, -1)
    return cache, nope, rope.float()


def dense(q, nope, rope, indices, scale):
    out = torch.zeros(B, S1, N1, NOPE)
    key = torch.cat([nope, rope], -1)[0, :, 0]
    for i in range(S1):
        chosen = [j for j in indices[0, i, 0].tolist() if 0 <= j <= i + (S2 - S1)]
        scores = q[0, i].float() @ key[chosen].t() * scale
        out[0, i] = torch.softmax(scores, -1) @ nope[0, chosen, 0]
    return out


@pytest.mark.parametrize("paged", [False, True])
def test_matches_dense_attention_over_the_dequantised_cache(paged):
    g = torch.Generator().manual_seed(5)
    cache, nope, rope = combined_cache(g)
    q = torch.randn(B, S1, N1, NOPE + ROPE, generator=g).to(torch.bfloat16)
    indices = torch.stack([torch.randperm(S2, generator=g)[:TOPK] for _ in range(S1)])[None, :, None].to(torch.int32)
    indices[0, 0, 0, -1] = -1
    want = dense(q, nope, rope, indices, 0.05)
    kwargs = {"tile_size": TILE, "rope_head_dim": ROPE, "attention_mode": 2}
    if paged:
        block = 16
        pages = cache.reshape(S2 // block, block, 1, cache.shape[-1])
        table = torch.arange(S2 // block, dtype=torch.int32)[None]
        kwargs.update(layout_kv="PA_BSND", block_table=table.npu(),
                      actual_seq_lengths_kv=torch.tensor([S2], dtype=torch.int32).npu())  # fmt: skip
        cache = pages
    out = torch_npu.npu_kv_quant_sparse_flash_attention(
        q.npu(), cache.npu(), cache.npu(), indices.npu(), 0.05, 2, 2, **kwargs
    )
    assert out.shape == (B, S1, N1, NOPE) and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu().float(), want.to(torch.bfloat16).float(), rtol=1e-2, atol=1e-2)


def test_refuses_other_quant_modes():
    g = torch.Generator().manual_seed(6)
    cache, _, _ = combined_cache(g)
    q = torch.randn(B, S1, N1, NOPE + ROPE).to(torch.bfloat16)
    indices = torch.zeros(B, S1, 1, TOPK, dtype=torch.int32)
    raises_operator_error(
        lambda: torch_npu.npu_kv_quant_sparse_flash_attention(
            q.npu(), cache.npu(), cache.npu(), indices.npu(), 0.1, 1, 2, tile_size=TILE, rope_head_dim=ROPE
        ),  # fmt: skip
        "npu_kv_quant_sparse_flash_attention: key_quant_mode and value_quant_mode only support 2 (per tile), got 1 and 2",
    )
