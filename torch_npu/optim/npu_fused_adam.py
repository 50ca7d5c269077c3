"""NpuFusedAdam: torch.optim.Adam's update on combined buffers."""

from torch.optim.adam import adam

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase, check_hyperparameters

__all__ = ["NpuFusedAdam"]


class NpuFusedAdam(NpuFusedOptimizerBase):
    """Adam (L2 weight decay, optional AMSGrad), equal to torch.optim.Adam."""

    _state_tensors = {"exp_avg": "zeros", "exp_avg_sq": "zeros", "max_exp_avg_sq": "zeros"}
    _decoupled_weight_decay = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False):
        check_hyperparameters(lr=lr, eps=eps, betas=betas)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
        super().__init__(params, defaults)

    def _update(self, group, params, grads, states):
        beta1, beta2 = group["betas"]
        adam(
            params,
            grads,
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [s["max_exp_avg_sq"] for s in states],
            [s["step"] for s in states],
            foreach=False,
            decoupled_weight_decay=self._decoupled_weight_decay,
            amsgrad=group["amsgrad"],
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=False,
        )
