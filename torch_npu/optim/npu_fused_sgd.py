"""NpuFusedSGD: torch.optim.SGD's update on combined buffers."""

from torch.optim.optimizer import required

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase, check_hyperparameters

__all__ = ["NpuFusedSGD"]


class NpuFusedSGD(NpuFusedOptimizerBase):
    """SGD with momentum, dampening, weight decay and Nesterov momentum, equal to torch.optim.SGD."""

    _state_tensors = {"momentum_buffer": "zeros"}

    def __init__(self, params, lr=required, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        check_hyperparameters(lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults)

    def step(self, closure=None):
        return super().step(closure)

    def _update(self, group, params, grads, states):
        lr, momentum, wd = group["lr"], group["momentum"], group["weight_decay"]
        for param, grad, state in zip(params, grads, states):
            d_p = grad if wd == 0 else grad.add(param, alpha=wd)
            if momentum != 0:
                buf = state["momentum_buffer"]
                if float(state["step"]) == 0:
                    buf.copy_(d_p)
                else:
                    buf.mul_(momentum).add_(d_p, alpha=1 - group["dampening"])
                d_p = d_p.add(buf, alpha=momentum) if group["nesterov"] else buf
            param.add_(d_p, alpha=-lr)
            state["step"] += 1
