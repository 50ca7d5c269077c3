"""npu_multi_head_attention against fairseq's attention written out here (projections, scaled scores plus an
additive mask, float32 softmax, bit-mask dropout, output projection), gradients included, and
contrib.MultiheadAttention's fused path (MHAConfig.set_fussion) against its unfused one."""

import pytest
import torch
from op_check import check_op

import torch_npu
from torch_npu.contrib.module import MultiheadAttention
from torch_npu.contrib.module.multihead_attention import MHAConfig

BATCH, HEADS, DIM, TGT, SRC = 2, 2, 4, 3, 5
EMBED = HEADS * DIM


def _inputs(seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return (torch.rand(*shape, generator=g) * 2 - 1).to(dtype)

    return [
        rand(BATCH * TGT, EMBED),
        rand(BATCH * SRC, EMBED),
        rand(BATCH * SRC, EMBED),
        rand(EMBED, EMBED),
        rand(EMBED, EMBED),
        rand(EMBED, EMBED),
        rand(BATCH, HEADS, TGT, SRC),
        rand(EMBED, EMBED),
        rand(EMBED),
        rand(EMBED),
        rand(EMBED),
        rand(EMBED),
    ]


def reference(query, key, value, wq, wk, wv, mask, wo, bq, bk, bv, bo, keep=None, p=0.0):
    def heads(x, length):
        return x.view(BATCH, length, HEADS, DIM).transpose(1, 2)

    q = heads(query @ wq.t() + bq, TGT) * DIM**-0.5
    k = heads(key @ wk.t() + bk, SRC)
    v = heads(value @ wv.t() + bv, SRC)
    softmax = torch.softmax((q @ k.transpose(-1, -2) + mask).float(), -1)
    probs = softmax.to(query.dtype)
    if keep is not None:
        probs = probs * keep / (1 - p)
    context = (probs @ v).transpose(1, 2).reshape(BATCH * TGT, EMBED)
    return context @ wo.t() + bo, softmax, context


def test_matches_the_composition_with_gradients():
    args = _inputs(0)

    def op(*tensors):
        out = torch_npu.npu_multi_head_attention(*tensors, None, HEADS, DIM, SRC, TGT, 0.0, True)
        return out[0], out[5], out[7]

    check_op(op, tuple(args), reference, grad=(0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11), atol=1e-5, rtol=1e-5)


def test_dropout_applies_the_given_bit_mask():
    args = _inputs(1)
    p = 0.4
    mask = torch_npu.npu_dropout_gen_mask((BATCH, HEADS, TGT, SRC), p, device="npu")
    out = torch_npu.npu_multi_head_attention(*[a.npu() for a in args], mask, HEADS, DIM, SRC, TGT, p, True)
    bits = (mask.cpu().view(-1, 1) >> torch.arange(8, dtype=torch.uint8)) & 1
    keep = bits.reshape(-1)[: BATCH * HEADS * TGT * SRC].view(BATCH, HEADS, TGT, SRC).float()
    want, _, _ = reference(*args, keep=keep, p=p)
    torch.testing.assert_close(out[0].cpu(), want, atol=1e-5, rtol=1e-5)
    assert torch.equal(out[1].cpu(), mask.cpu())


def test_half_inputs_with_float_weights_compute_in_half():
    args = _inputs(2, torch.float16)
    weights = [a.float() for a in args[3:]]
    out = torch_npu.npu_multi_head_attention(
        *[a.npu() for a in args[:3] + weights], None, HEADS, DIM, SRC, TGT, 0.0, True
    )
    assert out[0].dtype == torch.float16 and out[5].dtype == torch.float32
    want, _, _ = reference(*[a.float() for a in args])
    torch.testing.assert_close(out[0].cpu().float(), want, atol=2e-2, rtol=2e-2)


def test_contrib_fused_path_equals_the_unfused_layer():
    torch.manual_seed(3)
    model = MultiheadAttention(embed_dim=EMBED, num_heads=HEADS, kdim=EMBED, vdim=EMBED).npu().eval()
    query = torch.randn(BATCH * TGT, EMBED, device="npu")
    key, value = torch.randn(BATCH * SRC, EMBED, device="npu"), torch.randn(BATCH * SRC, EMBED, device="npu")
    mask = torch.randn(BATCH, HEADS, TGT, SRC, device="npu")
    unfused, _ = model(query, key, value, BATCH, TGT, SRC, attn_mask=mask)
    MHAConfig.set_fussion()
    try:
        fused, weights = model(query, key, value, BATCH, TGT, SRC, mask)
    finally:
        MHAConfig.use_fussion_mha = False
    assert weights is None
    torch.testing.assert_close(fused.cpu(), unfused.cpu(), atol=1e-6, rtol=1e-5)


def test_dropout_without_a_mask_is_refused():
    args = [a.npu() for a in _inputs(4)]
    with pytest.raises(RuntimeError, match=r"^npu_multi_head_attention: dropout_prob=0.1 needs dropout_mask"):
        torch_npu.npu_multi_head_attention(*args, None, HEADS, DIM, SRC, TGT, 0.1, True)
    with pytest.raises(RuntimeError, match=r"query's 6 rows are not a whole number of tgt_len=4 batches"):
        torch_npu.npu_multi_head_attention(*args, None, HEADS, DIM, SRC, 4, 0.0, True)


def test_fp32_softmax_flag_off_keeps_the_input_dtype():
    args = [a.half().npu() for a in _inputs(5)]
    out = torch_npu.npu_multi_head_attention(*args, None, HEADS, DIM, SRC, TGT, 0.0, False)
    assert out[5].dtype == torch.float16
    torch.testing.assert_close(out[5].float().sum(-1).cpu(), torch.ones(BATCH, HEADS, TGT), atol=2e-3, rtol=0)
