"""NpuFusedRMSpropTF: TensorFlow-style RMSprop on combined buffers.

Differs from torch.optim.RMSprop as TensorFlow's does: square_avg starts at ones, eps is added
inside the square root, optional decoupled weight decay, and lr may be applied inside the momentum
buffer (lr_in_momentum)."""

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase, check_hyperparameters

__all__ = ["NpuFusedRMSpropTF"]


class NpuFusedRMSpropTF(NpuFusedOptimizerBase):
    _state_tensors = {"square_avg": "ones", "grad_avg": "zeros", "momentum_buffer": "zeros"}

    def __init__(
        self,
        params,
        lr=1e-2,
        alpha=0.9,
        eps=1e-10,
        weight_decay=0,
        momentum=0.0,
        centered=False,
        decoupled_decay=False,
        lr_in_momentum=True,
    ):
        check_hyperparameters(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        super().__init__(
            params,
            dict(
                lr=lr,
                alpha=alpha,
                eps=eps,
                weight_decay=weight_decay,
                momentum=momentum,
                centered=centered,
                decoupled_decay=decoupled_decay,
                lr_in_momentum=lr_in_momentum,
            ),
        )

    def _update(self, group, params, grads, states):
        lr, wd, momentum = group["lr"], group["weight_decay"], group["momentum"]
        one_minus_alpha = 1.0 - group["alpha"]
        for p, grad, state in zip(params, grads, states):
            state["step"] += 1
            if wd != 0:
                if group["decoupled_decay"]:
                    p.mul_(1.0 - lr * wd)
                else:
                    grad = grad.add(p, alpha=wd)
            square_avg = state["square_avg"]
            square_avg.add_(grad.pow(2) - square_avg, alpha=one_minus_alpha)
            if group["centered"]:
                grad_avg = state["grad_avg"]
                grad_avg.add_(grad - grad_avg, alpha=one_minus_alpha)
                avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).add(group["eps"]).sqrt_()
            else:
                avg = square_avg.add(group["eps"]).sqrt_()
            if momentum > 0:
                buf = state["momentum_buffer"]
                if group["lr_in_momentum"]:
                    buf.mul_(momentum).addcdiv_(grad, avg, value=lr)
                    p.add_(-buf)
                else:
                    buf.mul_(momentum).addcdiv_(grad, avg)
                    p.add_(buf, alpha=-lr)
            else:
                p.addcdiv_(grad, avg, value=-lr)
