"""npu_masked_softmax_with_rel_pos_bias against the window-attention softmax written out per window and head,
4-D and 5-D layouts, with and without a mask, and its argument checks."""

import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu

B, W, N, S = 2, 3, 2, 4


def reference(x, mask, bias, scale_value=1.0, inner_precision_mode=0):
    five = x.reshape(B, W, N, S, S).double()
    out = torch.empty_like(five)
    for b in range(B):
        for w in range(W):
            for h in range(N):
                logits = five[b, w, h] * scale_value + bias.reshape(N, S, S)[h].double()
                if mask is not None:
                    logits = logits + mask.reshape(W, S, S)[w].double()
                out[b, w, h] = torch.softmax(logits, -1)
    return out.reshape(x.shape).to(x.dtype)


def test_four_and_five_dims_with_and_without_mask():
    g = torch.Generator().manual_seed(12)
    x = torch.randn(B * W, N, S, S, generator=g)
    mask = torch.where(torch.rand(W, 1, S, S, generator=g) > 0.3, 0.0, -100.0)
    bias = torch.randn(1, N, S, S, generator=g)
    check_op(torch_npu.npu_masked_softmax_with_rel_pos_bias, (x, mask, bias, 0.5), reference, atol=1e-6, rtol=1e-5)
    check_op(torch_npu.npu_masked_softmax_with_rel_pos_bias, (x.reshape(B, W, N, S, S).half(), None, bias.half()),
             reference, atol=1e-3, rtol=1e-3)  # fmt: skip


def test_bad_arguments():
    x = torch.randn(B * W, N, S, S).npu()
    raises_operator_error(
        lambda: torch_npu.npu_masked_softmax_with_rel_pos_bias(
            x, torch.zeros(4, S, S).npu(), torch.zeros(N, S, S).npu()
        ),
        "npu_masked_softmax_with_rel_pos_bias: atten_mask's 4 windows do not divide x's leading dims (6,)",
    )
    raises_operator_error(
        lambda: torch_npu.npu_masked_softmax_with_rel_pos_bias(x[0], None, torch.zeros(N, S, S).npu()),
        "npu_masked_softmax_with_rel_pos_bias: x must be 4-D (B*W, N, S1, S2) or 5-D (B, W, N, S1, S2), got 3-D",
    )
