"""npu_ring_attention_update merges two npu_fusion_attention passes over disjoint key blocks into the
attention over all keys (what ring attention does across ranks), in SBH and TND layouts."""

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu

torch.manual_seed(0)
S, B, N, D = 6, 2, 3, 8


def attention(q, k, v, layout, **kwargs):
    out = torch_npu.npu_fusion_attention(q, k, v, N, layout, scale=D**-0.5, **kwargs)
    return out[0], out[1], out[2]


def test_sbh_blocks_merge_into_full_attention():
    q, k, v = (torch.randn(S, B, N * D).npu() for _ in range(3))
    full, _, _ = attention(q, k, v, "SBH")
    first = attention(q, k[:3], v[:3], "SBH")
    second = attention(q, k[3:], v[3:], "SBH")
    merged, softmax_max, softmax_sum = torch_npu.npu_ring_attention_update(*first, *second)
    torch.testing.assert_close(merged.cpu(), full.cpu(), atol=1e-5, rtol=1e-5)
    assert softmax_max.shape == (B, N, S, 8) and softmax_sum.dtype == torch.float32
    # the merged statistics are those of the full pass
    _, full_max, full_sum = attention(q, k, v, "SBH")
    torch.testing.assert_close(softmax_max.cpu(), full_max.cpu())
    torch.testing.assert_close(softmax_sum.cpu(), full_sum.cpu(), atol=1e-5, rtol=1e-5)


def test_tnd_blocks_merge_into_full_attention():
    lengths = [4, 2]
    t = sum(lengths)
    q, k, v = (torch.randn(t, N, D).npu() for _ in range(3))
    cumulative = [4, 6]

    def varlen(keys_from, keys_to):
        ks = torch.cat([k[0:4][keys_from[0] : keys_to[0]], k[4:6][keys_from[1] : keys_to[1]]])
        vs = torch.cat([v[0:4][keys_from[0] : keys_to[0]], v[4:6][keys_from[1] : keys_to[1]]])
        kv_len = [keys_to[0] - keys_from[0], keys_to[1] - keys_from[1]]
        kv_cum = [kv_len[0], kv_len[0] + kv_len[1]]
        return attention(q, ks, vs, "TND", actual_seq_qlen=cumulative, actual_seq_kvlen=kv_cum)

    full, _, _ = varlen((0, 0), (4, 2))
    merged, _, _ = torch_npu.npu_ring_attention_update(
        *varlen((0, 0), (2, 1)),
        *varlen((2, 1), (4, 2)),
        actual_seq_qlen=torch.tensor([0] + cumulative),
        input_layout="TND",
    )
    torch.testing.assert_close(merged.cpu(), full.cpu(), atol=1e-5, rtol=1e-5)


def test_half_precision_output_keeps_the_input_dtype():
    q, k, v = (torch.randn(S, B, N * D).half().npu() for _ in range(3))
    merged = torch_npu.npu_ring_attention_update(
        *attention(q, k[:2], v[:2], "SBH"), *attention(q, k[2:], v[2:], "SBH")
    )[0]
    full = attention(q, k, v, "SBH")[0]
    assert merged.dtype == torch.float16
    torch.testing.assert_close(merged.cpu().float(), full.cpu().float(), atol=2e-3, rtol=2e-3)


RING_ERRORS = [
    (
        lambda: torch_npu.npu_ring_attention_update(
            *([torch.rand(2, 1, 4, device="npu")] + [torch.rand(1, 1, 2, 8, device="npu")] * 2) * 2, input_layout="BSH"
        ),
        "npu_ring_attention_update: input_layout must be 'SBH' or 'TND', got 'BSH'",
    ),
    (
        lambda: torch_npu.npu_ring_attention_update(
            *([torch.rand(2, 1, 4, device="npu")] + [torch.rand(2, 1, 8, device="npu")] * 2) * 2, input_layout="TND"
        ),
        "npu_ring_attention_update: actual_seq_qlen is required when input_layout is 'TND'",
    ),
]


@pytest.mark.parametrize("call,message", RING_ERRORS, ids=[c[1][27:80] for c in RING_ERRORS])
def test_ring_attention_update_invalid_arguments(call, message):
    raises_operator_error(call, message)
