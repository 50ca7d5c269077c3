"""npu_apply_adam_w and npu_apply_adam: one fused AdamW / Adam step (the ApplyAdamW and ApplyAdam
kernels).

npu_apply_adam (TensorFlow's ApplyAdam), .out form with var, m, v updated in place:
    lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
    m += (1 - beta1) * (grad - m);  v += (1 - beta2) * (grad^2 - v)
    var -= lr_t * m / (sqrt(v) + epsilon), or with use_nesterov
    var -= lr_t * (beta1 * m + (1 - beta1) * grad) / (sqrt(v) + epsilon)

npu_apply_adam_w:
With var, m, v updated in place (the .out form):
    g = -grad if maximize else grad;  var *= 1 - lr * weight_decay
    m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2
    amsgrad: max_grad_norm = max(max_grad_norm, v), used instead of v below
    beta1^t = beta1_power * beta1;  beta2^t = beta2_power * beta2
    var -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + epsilon)
beta1_power / beta2_power are beta1^(t-1) and beta2^(t-1): the kernel advances them by one step itself, as
CANN's ApplyAdamW formula and op-plugin's reference do (MindSpeed's AdamW passes beta ** (step - 1)). The
functional form starts from var = m = v = 0 (the NPU hands back freshly allocated outputs) and returns the three
updated tensors.
"""

import torch

from torch_npu.ops._common import check, require
from torch_npu.ops.registration import npu_op

__all__ = []

_ARGS = (
    "Scalar beta1_power, Scalar beta2_power, Scalar lr, Scalar weight_decay, Scalar beta1, Scalar beta2, "
    "Scalar epsilon, Tensor grad, Tensor? max_grad_norm, bool? amsgrad, bool? maximize"
)


def _step(
    var, m, v, beta1_power, beta2_power, lr, weight_decay, beta1, beta2, epsilon, grad, max_grad_norm, amsgrad, maximize
):
    check(
        var.shape == grad.shape == m.shape == v.shape,
        "npu_apply_adam_w",
        f"var, m, v and grad must have one shape, got {tuple(var.shape)}, {tuple(m.shape)}, {tuple(v.shape)}, "
        f"{tuple(grad.shape)}",
    )
    g = -grad if maximize else grad
    var.mul_(1 - lr * weight_decay)
    m.mul_(beta1).add_(g, alpha=1 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    second = v
    if amsgrad:
        require(max_grad_norm is not None, "if amsgrad is true, max_gard_norm input must be entered")  # op-plugin's
        torch.maximum(max_grad_norm, v, out=max_grad_norm)
        second = max_grad_norm
    denom = (second / (1 - beta2_power * beta2)).sqrt().add_(epsilon)
    var.addcdiv_(m / (1 - beta1_power * beta1), denom, value=-lr)
    return var, m, v


def _functional(
    beta1_power,
    beta2_power,
    lr,
    weight_decay,
    beta1,
    beta2,
    epsilon,
    grad,
    max_grad_norm=None,
    amsgrad=False,
    maximize=False,
):
    var, m, v = (torch.zeros_like(grad) for _ in range(3))
    max_norm = max_grad_norm.clone() if max_grad_norm is not None else None
    return _step(
        var, m, v, beta1_power, beta2_power, lr, weight_decay, beta1, beta2, epsilon, grad, max_norm, amsgrad, maximize
    )


def _out(
    beta1_power,
    beta2_power,
    lr,
    weight_decay,
    beta1,
    beta2,
    epsilon,
    grad,
    max_grad_norm=None,
    amsgrad=False,
    maximize=False,
    *,
    var,
    m,
    v,
):
    return _step(
        var,
        m,
        v,
        beta1_power,
        beta2_power,
        lr,
        weight_decay,
        beta1,
        beta2,
        epsilon,
        grad,
        max_grad_norm,
        amsgrad,
        maximize,
    )


npu_op(
    f"npu_apply_adam_w({_ARGS}) -> (Tensor, Tensor, Tensor)",
    fake=lambda *a, **k: tuple(torch.empty_like(a[7]) for _ in range(3)),
)(_functional)
npu_op(
    f"npu_apply_adam_w.out({_ARGS}, *, Tensor(a!) var, Tensor(b!) m, Tensor(c!) v) "
    "-> (Tensor(a!), Tensor(b!), Tensor(c!))",
    fake=lambda *a, var, m, v, **k: (var, m, v),
)(_out)


_ADAM_ARGS = (
    "Scalar beta1_power, Scalar beta2_power, Scalar lr, Scalar beta1, Scalar beta2, Scalar epsilon, Tensor grad, "
    "bool? use_locking, bool? use_nesterov"
)


def _adam_step(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, use_nesterov):
    check(
        var.shape == grad.shape == m.shape == v.shape,
        "npu_apply_adam",
        f"var, m, v and grad must have one shape, got {tuple(var.shape)}, {tuple(m.shape)}, {tuple(v.shape)}, "
        f"{tuple(grad.shape)}",
    )
    lr_t = lr * (1 - beta2_power) ** 0.5 / (1 - beta1_power)
    m.add_(grad - m, alpha=1 - beta1)
    v.add_(grad * grad - v, alpha=1 - beta2)
    numerator = m * beta1 + grad * (1 - beta1) if use_nesterov else m
    var.addcdiv_(numerator, v.sqrt().add_(epsilon), value=-lr_t)
    return var, m, v


def _adam_functional(beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, use_locking=None, use_nesterov=None):
    var, m, v = (torch.zeros_like(grad) for _ in range(3))
    return _adam_step(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, bool(use_nesterov))


def _adam_out(
    beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, use_locking=None, use_nesterov=None, *, var, m, v
):
    return _adam_step(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, bool(use_nesterov))


npu_op(
    f"npu_apply_adam({_ADAM_ARGS}) -> (Tensor, Tensor, Tensor)",
    fake=lambda *a, **k: tuple(torch.empty_like(a[6]) for _ in range(3)),
)(_adam_functional)
npu_op(
    f"npu_apply_adam.out({_ADAM_ARGS}, *, Tensor(a!) var, Tensor(b!) m, Tensor(c!) v) "
    "-> (Tensor(a!), Tensor(b!), Tensor(c!))",
    fake=lambda *a, var, m, v, **k: (var, m, v),
)(_adam_out)


def npu_apply_adam_w_out(beta1_power, beta2_power, lr, weight_decay, beta1, beta2, epsilon, grad, max_grad_norm,
                         amsgrad, maximize, var, m, v):  # fmt: skip
    """torch_npu's positional out form of npu_apply_adam_w: the tensors it updates (var, m, v) come last; the
    hyper-parameters may be numbers or one-element tensors."""
    scalars = [float(s) if isinstance(s, torch.Tensor) else s for s in (beta1_power, beta2_power, lr, weight_decay,
                                                                         beta1, beta2, epsilon)]  # fmt: skip
    return torch.ops.npu.npu_apply_adam_w.out(*scalars, grad, max_grad_norm, amsgrad, maximize, var=var, m=m, v=v)
