"""The vocabulary-parallel cross-entropy operators: the forward against the kernel's golden (float32 logits,
packed target mask with numpy's bit packing), two shards combined as the all-reduce would equal
torch.nn.functional.cross_entropy, and the backward equal to autograd's gradients of the same loss."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from error_cases import raises_operator_error

import torch_npu

BT, H, V = 13, 16, 48


def golden_forward(input, weight, target, start, end):
    logits = torch.matmul(input.float(), weight.float().t())
    logits_max = logits.max(dim=-1).values
    sub = logits - logits_max.unsqueeze(-1)
    mask = (target < start) | (target >= end)
    masked_target = target.clone() - start
    masked_target[mask] = 0
    padded = F.pad(target, (0, (-len(target)) % 8), value=0)
    bits = ((padded < start) | (padded >= end)).to(torch.uint8).numpy().reshape(-1, 8)
    packed = torch.from_numpy(np.packbits(np.flip(bits, axis=1), axis=1).reshape(-1).copy())
    predicted = sub.gather(1, masked_target.long().view(-1, 1)).view(-1)
    predicted[mask] = 0.0
    return logits_max, sub.exp().sum(dim=-1), predicted, packed, masked_target, logits.to(input.dtype)


def inputs(seed, dtype=torch.float16, vocab=V):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(BT, H, generator=g).to(dtype)
    w = torch.randn(vocab, H, generator=g).to(dtype)
    return x, w


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("target_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("start", [0, 16])
def test_forward_matches_the_kernel_golden(dtype, target_dtype, start):
    x, w = inputs(start, dtype)
    target = torch.randint(0, 2 * V, (BT,), generator=torch.Generator().manual_seed(1)).to(target_dtype)
    got = torch_npu.npu_fused_linear_online_max_sum(
        x.npu(), w.npu(), target.npu(), start, start + V, return_logits=True
    )
    want = golden_forward(x, w, target, start, start + V)
    for name, g, w_ in zip(("max", "sum_exp", "predicted", "mask", "masked_target", "logits"), got, want):
        assert g.dtype == w_.dtype, name
        assert torch.equal(g.cpu(), w_), name
    assert torch_npu.npu_fused_linear_online_max_sum(x.npu(), w.npu(), target.npu(), start, start + V)[5] is None


def test_two_shards_combined_give_the_cross_entropy_and_its_gradients():
    x, w = inputs(3, torch.float16, 2 * V)  # the softmax is taken from the float16-rounded logits
    target = torch.randint(0, 2 * V, (BT,), generator=torch.Generator().manual_seed(4))
    shards = [
        torch_npu.npu_fused_linear_online_max_sum(
            x.npu(), w[r * V : (r + 1) * V].npu(), target.npu(), r * V, (r + 1) * V, return_logits=True
        )
        for r in range(2)
    ]
    # what the all-reduces across the two ranks compute: the global max, the sum of exp rescaled to it, and the
    # target logit (each shard's is relative to its own max, and only the shard holding the target has one)
    logits_max = torch.maximum(shards[0][0], shards[1][0])
    sum_exp = sum(s[1] * (s[0] - logits_max).exp() for s in shards)
    predicted = sum((s[2] + s[0] - logits_max) * _unmasked(s[3]) for s in shards)
    losses, softmaxes = [], []
    for s in shards:
        loss, softmax = torch_npu.npu_fused_cross_entropy_loss_with_max_sum(
            logits_max, sum_exp, predicted, vocab_parallel_logits=s[5]
        )
        losses.append(loss)
        softmaxes.append(softmax)
    reference_input = x.float().requires_grad_()
    reference_weight = w.float().requires_grad_()
    ref = F.cross_entropy(reference_input @ reference_weight.t(), target, reduction="none")
    torch.testing.assert_close(losses[0].cpu(), ref.detach(), atol=2e-2, rtol=1e-2)
    assert torch.equal(losses[0].cpu(), losses[1].cpu())
    grad = torch.rand(BT, generator=torch.Generator().manual_seed(5))
    ref.backward(grad)
    grads_input = []
    for r, s in enumerate(shards):
        gi, gw = torch_npu.npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
            grad.npu(), x.npu(), w[r * V : (r + 1) * V].npu(), s[3], s[4], softmax=softmaxes[r]
        )
        grads_input.append(gi.float().cpu())
        torch.testing.assert_close(gw.float().cpu(), reference_weight.grad[r * V : (r + 1) * V], atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(grads_input[0] + grads_input[1], reference_input.grad, atol=5e-2, rtol=2e-2)


def _unmasked(packed):
    bits = ((packed.cpu().to(torch.int32).view(-1, 1) >> torch.arange(8)) & 1).view(-1)[:BT]
    return (1 - bits).bool().npu()


def test_backward_recomputes_the_softmax_when_it_is_not_kept():
    x, w = inputs(6)
    target = torch.randint(0, V, (BT,), generator=torch.Generator().manual_seed(7))
    lmax, sexp, pred, mask, mtarget, logits = torch_npu.npu_fused_linear_online_max_sum(
        x.npu(), w.npu(), target.npu(), 0, V, return_logits=True
    )
    _, softmax = torch_npu.npu_fused_cross_entropy_loss_with_max_sum(lmax, sexp, pred, vocab_parallel_logits=logits)
    grad = torch.ones(BT).npu()
    kept = torch_npu.npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
        grad, x.npu(), w.npu(), mask, mtarget, softmax=softmax
    )
    recomputed = torch_npu.npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
        grad, x.npu(), w.npu(), mask, mtarget, logits_max=lmax, sum_exp_logits=sexp
    )
    for a, b in zip(kept, recomputed):
        torch.testing.assert_close(a.cpu().float(), b.cpu().float(), atol=2e-2, rtol=1e-2)


def test_loss_without_logits_returns_no_softmax():
    lmax, sexp, pred = torch.randn(BT), torch.rand(BT) + 1, torch.randn(BT)
    loss, softmax = torch_npu.npu_fused_cross_entropy_loss_with_max_sum(lmax.npu(), sexp.npu(), pred.npu())
    assert softmax is None and torch.equal(loss.cpu(), sexp.log() - pred)


BAD_INPUTS = [
    (
        lambda x, w, t: torch_npu.npu_fused_linear_online_max_sum(x.float(), w.float(), t, 0, V),
        "npu_fused_linear_online_max_sum: input and weight must both be float16 or bfloat16",
    ),
    (
        lambda x, w, t: torch_npu.npu_fused_linear_online_max_sum(x, w, t, 8, 4),
        "npu_fused_linear_online_max_sum: vocab_end_index 4 must not be smaller than vocab_start_index 8",
    ),
    (
        lambda x, w, t: torch_npu.npu_fused_linear_online_max_sum(x, w, t, 0, 2 * V),
        r"npu_fused_linear_online_max_sum: the shard \[0, 96\) holds targets beyond weight's 48 rows",
    ),
    (
        lambda x, w, t: torch_npu.npu_fused_cross_entropy_loss_with_max_sum(
            t.float(), t.float(), t.float(), label_smoothing=0.1
        ),
        "npu_fused_cross_entropy_loss_with_max_sum: label_smoothing only supports 0.0, got 0.1",
    ),
    (
        lambda x, w, t: torch_npu.npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
            t.float(), x, w, torch.zeros(2, dtype=torch.uint8).npu(), t
        ),
        "npu_fused_linear_cross_entropy_loss_with_max_sum_backward: without softmax, logits_max and "
        "sum_exp_logits are required",
    ),
]


@pytest.mark.parametrize("call, message", BAD_INPUTS)
def test_bad_inputs(call, message):
    x, w = inputs(8)
    t = torch.arange(BT).npu() * 7
    with pytest.raises(RuntimeError, match=f"^{message}"):
        call(x.npu(), w.npu(), t)


def test_forward_and_loss_under_torch_compile():
    x, w = inputs(9)
    target = torch.randint(0, V, (BT,), generator=torch.Generator().manual_seed(9)).npu()

    def step(x, w, target):
        lmax, sexp, pred, _, _, logits = torch_npu.npu_fused_linear_online_max_sum(x, w, target, 0, V, True)
        return torch_npu.npu_fused_cross_entropy_loss_with_max_sum(lmax, sexp, pred, vocab_parallel_logits=logits)

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    for got, want in zip(compiled(x.npu(), w.npu(), target), step(x.npu(), w.npu(), target)):
        assert torch.equal(got.cpu(), want.cpu())


L = torch.long


def n(*shape, **kwargs):
    return torch.zeros(*shape, **kwargs).npu()


EXACT_ERRORS = [
    (
        lambda: torch_npu.npu_fused_linear_online_max_sum(
            n(4, 8, dtype=torch.half), n(16, 8, dtype=torch.half), n(4), 0, 16
        ),
        "npu_fused_linear_online_max_sum: target must be int32 or int64 [BT=4], got (4,) torch.float32",
    ),
    (
        lambda: torch_npu.npu_fused_linear_online_max_sum(
            n(4, 8, dtype=torch.half), n(16, 7, dtype=torch.half), n(4, dtype=L), 0, 16
        ),
        "npu_fused_linear_online_max_sum: weight must be [V, H=8], got (16, 7)",
    ),
    (
        lambda: torch_npu.npu_fused_linear_online_max_sum(
            n(4, dtype=torch.half), n(16, 7, dtype=torch.half), n(4, dtype=L), 0, 16
        ),
        "npu_fused_linear_online_max_sum: input and weight must be 2-D, got (4,) and (16, 7)",
    ),
    (
        lambda: torch_npu.npu_fused_linear_online_max_sum(
            n(4, 8, dtype=torch.half), n(16, 8, dtype=torch.half), n(4, dtype=L), -1, 16
        ),
        "npu_fused_linear_online_max_sum: vocab_start_index must not be negative, got -1",
    ),
    (
        lambda: torch_npu.npu_fused_cross_entropy_loss_with_max_sum(n(4), n(4), n(4), input=n(4, 8)),
        "npu_fused_cross_entropy_loss_with_max_sum: input and weight only support None",
    ),
    (
        lambda: torch_npu.npu_fused_cross_entropy_loss_with_max_sum(n(4), n(3), n(4)),
        "npu_fused_cross_entropy_loss_with_max_sum: sum_exp_logits must be float32 [4], got (3,) torch.float32",
    ),
    (
        lambda: torch_npu.npu_fused_cross_entropy_loss_with_max_sum(n(4), n(4), n(4), vocab_parallel_logits=n(3, 8)),
        "npu_fused_cross_entropy_loss_with_max_sum: vocab_parallel_logits must be [4, V], got (3, 8)",
    ),
    (
        lambda: torch_npu.npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
            n(3),
            n(4, 8, dtype=torch.half),
            n(16, 8, dtype=torch.half),
            n(1, dtype=torch.uint8),
            n(4, dtype=L),
            softmax=n(4, 16),
        ),
        "npu_fused_linear_cross_entropy_loss_with_max_sum_backward: grad must be float32 [BT=4], got (3,) torch.float32",
    ),
    (
        lambda: torch_npu.npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
            n(12),
            n(12, 8, dtype=torch.half),
            n(16, 8, dtype=torch.half),
            n(1, dtype=torch.uint8),
            n(12, dtype=L),
            softmax=n(12, 16),
        ),
        "npu_fused_linear_cross_entropy_loss_with_max_sum_backward: target_mask must be uint8 holding 12 bits, got (1,) torch.uint8",
    ),
    (
        lambda: torch_npu.npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
            n(4),
            n(4, 8, dtype=torch.half),
            n(16, 8, dtype=torch.half),
            n(1, dtype=torch.uint8),
            n(3, dtype=L),
            softmax=n(4, 16),
        ),
        "npu_fused_linear_cross_entropy_loss_with_max_sum_backward: masked_target must be [BT=4], got (3,)",
    ),
    (
        lambda: torch_npu.npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
            n(4),
            n(4, 8, dtype=torch.half),
            n(16, 8, dtype=torch.half),
            n(1, dtype=torch.uint8),
            n(4, dtype=L),
            softmax=n(4, 15),
        ),
        "npu_fused_linear_cross_entropy_loss_with_max_sum_backward: softmax must be float32 [4, 16], got (4, 15) torch.float32",
    ),
    (
        lambda: torch_npu.npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
            n(4),
            n(4, 8, dtype=torch.half),
            n(16, 8, dtype=torch.half),
            n(1, dtype=torch.uint8),
            torch.full((4,), 16, dtype=L).npu(),
            softmax=n(4, 16),
        ),
        "npu_fused_linear_cross_entropy_loss_with_max_sum_backward: masked_target must lie in [0, 16)",
    ),
    (
        lambda: torch_npu.npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
            n(4),
            n(4, 8, dtype=torch.half),
            n(16, 8, dtype=torch.half),
            n(1, dtype=torch.uint8),
            n(4, dtype=L),
            0.1,
            softmax=n(4, 16),
        ),
        "npu_fused_linear_cross_entropy_loss_with_max_sum_backward: label_smoothing only supports 0.0, got 0.1",
    ),
]


@pytest.mark.parametrize("call, message", EXACT_ERRORS)
def test_bad_inputs_give_torch_npus_error_text(call, message):
    raises_operator_error(call, message)
