"""The named loss backward operators against autograd of torch's losses on the CPU."""

import pytest
import torch
import torch.nn.functional as F
from op_check import check_op

import torch_npu

torch.manual_seed(0)
REDUCTIONS = ["none", "mean", "sum"]


def autograd_of(forward, inputs, cotangent, wanted=(0,)):
    leaves = [x.detach().clone().requires_grad_(i in wanted) for i, x in enumerate(inputs)]
    found = torch.autograd.grad(forward(*leaves), [leaves[i] for i in wanted], cotangent)
    return found[0] if len(wanted) == 1 else found


def upstream(reduction, shape):
    return torch.randn(shape) if reduction == 0 else torch.randn(())


def test_softmax_cross_entropy_with_logits_backward():
    x, labels, dy = torch.randn(5, 7), torch.softmax(torch.randn(5, 7), -1), torch.randn(5)
    check_op(
        torch_npu.npu_softmax_cross_entropy_with_logits_backward,
        (dy, x, labels),
        lambda dy, x, labels: autograd_of(lambda s, t: -(t * torch.log_softmax(s, -1)).sum(-1), [x, labels], dy),
    )


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_binary_cross_entropy_with_logits_backward(reduction):
    x, target = torch.randn(4, 6), torch.rand(4, 6)
    weight, pos_weight = torch.rand(6), torch.rand(6) + 0.5
    dy = upstream(reduction, (4, 6))
    mode = REDUCTIONS[reduction]

    def ref(dy, x, target, weight, pos_weight):
        loss = lambda s: F.binary_cross_entropy_with_logits(s, target, weight, reduction=mode, pos_weight=pos_weight)  # noqa: E731
        return autograd_of(loss, [x], dy)

    check_op(
        lambda *a: torch_npu.npu_binary_cross_entropy_with_logits_backward(*a, reduction),
        (dy, x, target, weight, pos_weight),
        ref,
    )


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_kl_div_backward_for_self_and_target(reduction, log_target):
    x = torch.log_softmax(torch.randn(3, 5), -1)
    target = torch.log_softmax(torch.randn(3, 5), -1) if log_target else torch.softmax(torch.randn(3, 5), -1)
    dy = upstream(reduction, (3, 5))
    mode = REDUCTIONS[reduction]
    kl = lambda s, t: F.kl_div(s, t, reduction=mode, log_target=log_target)  # noqa: E731
    for op, wanted in ((torch_npu.kl_div_backward, 0), (torch_npu.kl_div_target_backward, 1)):
        check_op(
            lambda dy, x, t, op=op: op(dy, x, t, reduction, log_target=log_target),
            (dy, x, target),
            lambda dy, x, t, wanted=wanted: autograd_of(kl, [x, t], dy, (wanted,)),
        )


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_l1_loss_backward(reduction):
    x, target = torch.randn(4, 3), torch.randn(4, 3)
    dy = upstream(reduction, (4, 3))
    check_op(
        lambda dy, x, t: torch_npu.l1_loss_backward(dy, x, t, reduction),
        (dy, x, target),
        lambda dy, x, t: autograd_of(lambda s: F.l1_loss(s, t, reduction=REDUCTIONS[reduction]), [x], dy),
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_loss_backward_from_the_saved_log_prob(reduction, label_smoothing):
    x = torch.randn(6, 10)
    target = torch.tensor([1, 4, -100, 9, 0, 4])
    weight = torch.rand(10) + 0.5
    loss, log_prob, _, _ = torch_npu.npu_cross_entropy_loss(
        x.npu(), target.npu(), weight.npu(), reduction=reduction, label_smoothing=label_smoothing
    )
    dy = torch.randn(loss.shape)
    got = torch_npu.npu_cross_entropy_loss_backward(
        dy.npu(), log_prob, target.npu(), weight.npu(), reduction=reduction, label_smoothing=label_smoothing
    )
    forward = lambda s: F.cross_entropy(  # noqa: E731
        s, target, weight, reduction=reduction, label_smoothing=label_smoothing
    ).reshape(loss.shape)
    torch.testing.assert_close(got.cpu(), autograd_of(forward, [x], dy), rtol=1e-5, atol=1e-6)


def test_bad_reductions_and_zloss_are_refused():
    x = torch.randn(2, 3, device="npu")
    with pytest.raises(RuntimeError, match=r"reduction must be 0 \(none\), 1 \(mean\) or 2 \(sum\), got 3"):
        torch_npu.l1_loss_backward(x, x, x, 3)
    with pytest.raises(RuntimeError, match="zloss"):
        torch_npu.npu_cross_entropy_loss_backward(
            x.new_ones(1), x, torch.zeros(2, dtype=torch.long, device="npu"), lse_square_scale_for_zloss=0.1
        )
