"""NpuFusedAdadelta: torch.optim.Adadelta's update on combined buffers."""

from torch.optim.adadelta import adadelta

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase, check_hyperparameters

__all__ = ["NpuFusedAdadelta"]


class NpuFusedAdadelta(NpuFusedOptimizerBase):
    """Adadelta, equal to torch.optim.Adadelta."""

    _state_tensors = {"square_avg": "zeros", "acc_delta": "zeros"}

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0):
        check_hyperparameters(lr=lr, eps=eps)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay))

    def _update(self, group, params, grads, states):
        adadelta(
            params,
            grads,
            [s["square_avg"] for s in states],
            [s["acc_delta"] for s in states],
            [s["step"] for s in states],
            foreach=False,
            lr=group["lr"],
            rho=group["rho"],
            eps=group["eps"],
            weight_decay=group["weight_decay"],
            maximize=False,
        )
