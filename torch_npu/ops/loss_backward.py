"""The loss backward operators torch_npu exposes by name: npu_softmax_cross_entropy_with_logits_backward,
npu_binary_cross_entropy_with_logits_backward, npu_cross_entropy_loss_backward, kl_div_backward,
kl_div_target_backward and l1_loss_backward — the vector-Jacobian products of their forwards. reduction is
PyTorch's enum (0 none, 1 mean, 2 sum) except for npu_cross_entropy_loss_backward, which takes its forward's string."""

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import vjp

__all__ = []

_NPU = torch.ops.npu
_REDUCTIONS = ("none", "mean", "sum")


def _reduction(value, op):
    check(value in (0, 1, 2), op, f"reduction must be 0 (none), 1 (mean) or 2 (sum), got {value}")
    return _REDUCTIONS[value]


@npu_op(
    "npu_softmax_cross_entropy_with_logits_backward(Tensor grad, Tensor self, Tensor labels) -> Tensor",
    fake=lambda grad, x, labels: torch.empty_like(x),
)
def npu_softmax_cross_entropy_with_logits_backward(grad, x, labels):
    """d self of npu_softmax_cross_entropy_with_logits (grad is its per-row [N] gradient)."""
    return vjp(_NPU.npu_softmax_cross_entropy_with_logits, [x, labels], [0], [grad])[0]


@npu_op(
    "npu_binary_cross_entropy_with_logits_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight_opt, "
    "Tensor? pos_weight_opt, int reduction) -> Tensor",
    fake=lambda grad_output, x, target, weight, pos_weight, reduction: torch.empty_like(x),
)
def npu_binary_cross_entropy_with_logits_backward(grad_output, x, target, weight_opt, pos_weight_opt, reduction):
    """d self of F.binary_cross_entropy_with_logits."""
    mode = _reduction(reduction, "npu_binary_cross_entropy_with_logits_backward")

    def loss(logits):
        return F.binary_cross_entropy_with_logits(logits, target, weight_opt, reduction=mode, pos_weight=pos_weight_opt)

    return vjp(loss, [x], [0], [grad_output])[0]


def _kl_div(op, wanted):
    def kernel(grad_output, x, target, reduction=1, *, log_target=False):
        mode = _reduction(reduction, op)
        forward = lambda s, t: F.kl_div(s, t, reduction=mode, log_target=log_target)  # noqa: E731
        return vjp(forward, [x, target], [wanted], [grad_output])[0]

    def fake(grad_output, x, target, reduction=1, *, log_target=False):
        return torch.empty_like(target if wanted else x)

    kernel.__name__ = op
    kernel.__doc__ = f"d {'target' if wanted else 'self'} of F.kl_div(self, target)."
    npu_op(
        f"{op}(Tensor grad_output, Tensor self, Tensor target, int reduction=Mean, *, bool log_target=False) -> Tensor",
        fake=fake,
    )(kernel)


_kl_div("kl_div_backward", 0)
_kl_div("kl_div_target_backward", 1)


@npu_op(
    "l1_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction) -> Tensor",
    fake=lambda grad_output, x, target, reduction: torch.empty_like(x),
)
def l1_loss_backward(grad_output, x, target, reduction):
    """d self of F.l1_loss (sign(self - target), scaled by the reduction)."""
    mode = _reduction(reduction, "l1_loss_backward")
    return vjp(lambda s: F.l1_loss(s, target, reduction=mode), [x], [0], [grad_output])[0]


@npu_op(
    "npu_cross_entropy_loss_backward(Tensor grad_loss, Tensor log_prob, Tensor target, Tensor? weight=None, "
    "Tensor? grad_zloss=None, Tensor? lse_for_zloss=None, str reduction='mean', int ignore_index=-100, "
    "float label_smoothing=0.0, float lse_square_scale_for_zloss=0.0) -> Tensor",
    fake=lambda grad_loss, log_prob, target, *args, **kwargs: torch.empty_like(log_prob),
)
def npu_cross_entropy_loss_backward(
    grad_loss,
    log_prob,
    target,
    weight=None,
    grad_zloss=None,
    lse_for_zloss=None,
    reduction="mean",
    ignore_index=-100,
    label_smoothing=0.0,
    lse_square_scale_for_zloss=0.0,
):
    """d input of npu_cross_entropy_loss from its saved log_prob (the softmax is exp(log_prob); a log-softmax
    is unchanged by the constant that separates log_prob from the input)."""
    check(
        lse_square_scale_for_zloss == 0.0 and (grad_zloss is None or grad_zloss.numel() == 0),
        "npu_cross_entropy_loss_backward",
        "lse_square_scale_for_zloss and grad_zloss (zloss) are not supported, as on torch_npu",
    )

    def loss(logits):
        return _NPU.npu_cross_entropy_loss(logits, target, weight, reduction, ignore_index, label_smoothing)[0]

    return vjp(loss, [log_prob.float()], [0], [grad_loss.reshape(-1 if reduction == "none" else 1)])[0].to(
        log_prob.dtype
    )
