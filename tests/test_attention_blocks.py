"""The attention operators form their scores a block at a time (attention_core): several batches of whole heads,
some heads of one batch, or rows of one head, by size. Every way of cutting gives the bits of one block."""

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.ops import attention_core

B, N, S1, S2, D = 3, 4, 24, 20, 8


def _inputs():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, N, s, D, generator=g) for s in (S1, S2, S2))
    return {
        "q": q.npu(),
        "k": k.npu(),
        "v": v.npu(),
        "mask": (torch.rand(S1, S2, generator=g) < 0.2).npu(),  # broadcast over batch and heads
        "pse": torch.randn(1, N, S1, S2, generator=g).npu(),  # broadcast over batch
        "sink": torch.randn(N, generator=g).npu(),
        "dropout_mask": (torch.rand(B, N, S1, S2, generator=g) < 0.9).npu(),
    }


@pytest.mark.parametrize(
    "block",
    [2 * N * S1 * S2, 2 * S1 * S2, 8 * S2, 1],
    ids=["batches_of_whole_heads", "heads_of_one_batch", "rows_of_one_head", "the_fewest_rows"],
)
def test_every_cut_of_the_scores_gives_the_bits_of_one_block(monkeypatch, block):
    x = _inputs()

    def both(fn, **kwargs):
        monkeypatch.setattr(attention_core, "_SCORE_BLOCK_ELEMENTS", 1 << 30)
        whole = fn(x["q"], x["k"], x["v"], scale=0.3, **kwargs)
        monkeypatch.setattr(attention_core, "_SCORE_BLOCK_ELEMENTS", block)
        return whole, fn(x["q"], x["k"], x["v"], scale=0.3, **kwargs)

    runs = [
        both(attention_core.attend_with_stats, mask=x["mask"], pse=x["pse"], sink=x["sink"]),
        both(attention_core.attend_with_stats, mask=x["mask"], keep_prob=0.9, dropout_mask=x["dropout_mask"]),
        both(attention_core.attend_with_half_scores, mask=x["mask"], pse=x["pse"]),
    ]
    for whole, blocked in runs:
        assert [t.shape for t in blocked] == [t.shape for t in whole]
        assert all(t.device.type == "npu" for t in blocked)
        for a, b in zip(whole, blocked, strict=True):
            assert torch.equal(a.cpu(), b.cpu())
    out, row_max, row_sum = runs[0][1]
    assert out.shape == (B, N, S1, D) and row_max.shape == row_sum.shape == (B, N, S1, 1)
