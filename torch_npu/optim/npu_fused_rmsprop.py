"""NpuFusedRMSprop: torch.optim.RMSprop's update on combined buffers."""

from torch.optim.rmsprop import rmsprop

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase, check_hyperparameters

__all__ = ["NpuFusedRMSprop"]


class NpuFusedRMSprop(NpuFusedOptimizerBase):
    """RMSprop (optionally centered, with momentum), equal to torch.optim.RMSprop."""

    _state_tensors = {"square_avg": "zeros", "grad_avg": "zeros", "momentum_buffer": "zeros"}

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False):
        check_hyperparameters(lr=lr, eps=eps, momentum=momentum, alpha=alpha)
        super().__init__(
            params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered)
        )

    def _update(self, group, params, grads, states):
        rmsprop(
            params,
            grads,
            [s["square_avg"] for s in states],
            [s["grad_avg"] for s in states],
            [s["momentum_buffer"] for s in states],
            [s["step"] for s in states],
            foreach=False,
            lr=group["lr"],
            alpha=group["alpha"],
            eps=group["eps"],
            weight_decay=group["weight_decay"],
            momentum=group["momentum"],
            centered=group["centered"],
            maximize=False,
        )
