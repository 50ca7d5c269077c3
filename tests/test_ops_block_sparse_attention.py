"""npu_block_sparse_attention against dense attention with the block mask expanded to a -inf score mask (BNSD and
packed TND, GQA heads), its softmax_lse, a query block that selects nothing, and gradients against autograd."""

import math

import torch

import torch_npu
from tests.error_cases import raises_operator_error


def dense(q, k, v, mask, block, scale):
    """q [N1, Sq, D], k / v [N2, Skv, D], mask [N1, nbq, nbk] -> (out, lse) in float32."""
    group = q.shape[0] // k.shape[0]
    k, v = k.float().repeat_interleave(group, 0), v.float().repeat_interleave(group, 0)
    keep = (
        mask.bool().repeat_interleave(block[0], 1)[:, : q.shape[1]].repeat_interleave(block[1], 2)[:, :, : k.shape[1]]
    )
    scores = (q.float() @ k.transpose(1, 2) * scale).masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(scores, -1, keepdim=True)
    probs = torch.nan_to_num(torch.softmax(scores, -1), nan=0.0)
    return probs @ v, lse


def case(b=2, n1=4, n2=2, sq=10, skv=12, d=16, block=(4, 8), seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, n1, sq, d, generator=g).to(torch.float16)
    k = torch.randn(b, n2, skv, d, generator=g).to(torch.float16)
    v = torch.randn(b, n2, skv, d, generator=g).to(torch.float16)
    mask = (torch.rand(b, n1, math.ceil(sq / block[0]), math.ceil(skv / block[1]), generator=g) > 0.4).to(torch.int8)
    mask[0, 0, 0] = 0  # a query block of head 0 that selects nothing
    return q, k, v, mask, list(block)


def test_bnsd_matches_dense_attention_with_the_block_mask():
    q, k, v, mask, block = case()
    out, lse = torch_npu.npu_block_sparse_attention(
        q.npu(), k.npu(), v.npu(), mask.npu(), block, q_input_layout="BNSD", kv_input_layout="BNSD",
        num_key_value_heads=2, scale_value=0.25, softmax_lse_flag=1,
    )  # fmt: skip
    for b in range(2):
        want, want_lse = dense(q[b], k[b], v[b], mask[b], block, 0.25)
        torch.testing.assert_close(out[b].cpu().float(), want.to(torch.float16).float(), rtol=2e-3, atol=2e-3)
        torch.testing.assert_close(lse[b].cpu(), want_lse, rtol=1e-5, atol=1e-5)
    assert not out[0, 0, :4].cpu().any() and torch.isinf(lse[0, 0, :4].cpu()).all()


def test_tnd_packs_batches_by_their_lengths():
    q, k, v, mask, block = case(b=1, sq=9, skv=9, seed=1)
    q2, k2, v2, mask2, _ = case(b=1, sq=9, skv=9, seed=2)
    lengths = [9, 6]
    tq = torch.cat([q[0].transpose(0, 1), q2[0, :, :6].transpose(0, 1)])
    tk = torch.cat([k[0].transpose(0, 1), k2[0, :, :6].transpose(0, 1)])
    tv = torch.cat([v[0].transpose(0, 1), v2[0, :, :6].transpose(0, 1)])
    masks = torch.cat([mask, mask2])
    out, _ = torch_npu.npu_block_sparse_attention(
        tq.npu(), tk.npu(), tv.npu(), masks.npu(), block, num_key_value_heads=2, scale_value=0.3,
        actual_seq_lengths=lengths, actual_seq_lengths_kv=lengths,
    )  # fmt: skip
    first, _ = dense(q[0], k[0], v[0], mask[0], block, 0.3)
    second, _ = dense(q2[0, :, :6], k2[0, :, :6], v2[0, :, :6], mask2[0], block, 0.3)
    want = torch.cat([first.transpose(0, 1), second.transpose(0, 1)]).to(torch.float16)
    torch.testing.assert_close(out.cpu().float(), want.float(), rtol=2e-3, atol=2e-3)


def test_gradients_match_autograd_of_the_dense_form():
    q, k, v, mask, block = case(b=1, seed=3)
    leaves = [t[0].float().clone().requires_grad_(True) for t in (q, k, v)]
    want, _ = dense(*leaves, mask[0], block, 0.25)
    upstream = torch.randn(want.shape, generator=torch.Generator().manual_seed(4))
    want.backward(upstream)
    npu = [t.npu().requires_grad_(True) for t in (q, k, v)]
    out, _ = torch_npu.npu_block_sparse_attention(
        *npu, mask.npu(), block, q_input_layout="BNSD", kv_input_layout="BNSD", num_key_value_heads=2, scale_value=0.25
    )
    out.backward(upstream[None].to(torch.float16).npu())
    for got, leaf in zip(npu, leaves):
        torch.testing.assert_close(got.grad[0].cpu().float(), leaf.grad, rtol=2e-2, atol=2e-2)


def test_refuses_tnd_without_lengths():
    q, k, v, mask, block = case(b=1)
    raises_operator_error(
        lambda: torch_npu.npu_block_sparse_attention(
            q[0].transpose(0, 1).npu(),
            k[0].transpose(0, 1).npu(),
            v[0].transpose(0, 1).npu(),
            mask.npu(),
            block,
            num_key_value_heads=2,
        ),  # fmt: skip
        "npu_block_sparse_attention: actual_seq_lengths and actual_seq_lengths_kv are required with the TND layout",
    )
