"""npu_bert_apply_adam: BERT's Adam step (ApplyAdamV2), var, m, v updated in place by the .out form
(torch_npu.npu_bert_apply_adam(..., out=(var, m, v))).

    g = grad / global_grad_norm     when max_grad_norm > 0 and global_grad_norm > 1, else grad
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    update = m / (sqrt(v) + epsilon)
    adam_mode 0 ("adam"):        update += weight_decay * var  (weight_decay > 0);  var -= lr * update
    adam_mode 1 ("mbert_adam"):  update *= step_size;  update += weight_decay * lr * var  (weight_decay > 0);
                                 var -= update

The functional form (no state arguments) starts from var = m = v = 0, as npu_apply_adam's does.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_bert_apply_adam"
_ARGS = (
    "Scalar lr, Scalar beta1, Scalar beta2, Scalar epsilon, Tensor grad, Scalar max_grad_norm, "
    "Scalar global_grad_norm, Scalar weight_decay, Scalar? step_size=None, int adam_mode=0"
)


def _step(var, m, v, lr, beta1, beta2, epsilon, grad, max_grad_norm, global_grad_norm, weight_decay, step_size, mode):
    check(mode in (0, 1), _OP, f"adam_mode must be 0 (adam) or 1 (mbert_adam), got {mode}")
    check(var.dtype in (torch.float16, torch.float32), _OP, f"var must be float16 or float32, got {var.dtype}")
    check(
        var.shape == m.shape == v.shape == grad.shape and var.dtype == m.dtype == v.dtype == grad.dtype,
        _OP,
        f"var, m, v and grad must have one shape and dtype, got {tuple(var.shape)}, {tuple(m.shape)}, "
        f"{tuple(v.shape)}, {tuple(grad.shape)}",
    )
    check(mode == 0 or step_size is not None, _OP, "adam_mode=1 (mbert_adam) needs step_size")
    g = grad / global_grad_norm if max_grad_norm > 0 and global_grad_norm > 1 else grad
    m.mul_(beta1).add_(g, alpha=1 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    update = m / (v.sqrt() + epsilon)
    if mode == 0:
        if weight_decay > 0:
            update = update + weight_decay * var
        var.sub_(update * lr)
    else:
        update = update * step_size
        if weight_decay > 0:
            update = update + weight_decay * lr * var
        var.sub_(update)
    return var, m, v


def _functional(
    lr, beta1, beta2, epsilon, grad, max_grad_norm, global_grad_norm, weight_decay, step_size=None, adam_mode=0
):
    """(var, m, v) after one step from zero state."""
    var, m, v = (torch.zeros_like(grad) for _ in range(3))
    return _step(var, m, v, lr, beta1, beta2, epsilon, grad, max_grad_norm, global_grad_norm, weight_decay, step_size,
                 adam_mode)  # fmt: skip


def _out(
    lr, beta1, beta2, epsilon, grad, max_grad_norm, global_grad_norm, weight_decay, step_size=None, adam_mode=0,
    *, var, m, v,
):  # fmt: skip
    return _step(var, m, v, lr, beta1, beta2, epsilon, grad, max_grad_norm, global_grad_norm, weight_decay, step_size,
                 adam_mode)  # fmt: skip


npu_op(
    f"npu_bert_apply_adam({_ARGS}) -> (Tensor var, Tensor m, Tensor v)",
    fake=lambda *a, **k: tuple(torch.empty_like(a[4]) for _ in range(3)),
)(_functional)
npu_op(
    f"npu_bert_apply_adam.out({_ARGS}, *, Tensor(a!) var, Tensor(b!) m, Tensor(c!) v) "
    "-> (Tensor(a!), Tensor(b!), Tensor(c!))",
    fake=lambda *a, var, m, v, **k: (var, m, v),
)(_out)
