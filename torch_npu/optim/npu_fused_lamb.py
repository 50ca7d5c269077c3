"""NpuFusedLamb: LAMB (layer-wise adaptive moments, arXiv:1904.00962) on combined buffers.

Per parameter p with gradient g (g / global_norm first when use_global_grad_norm and the global
gradient norm exceeds 1):
    m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;  u = m / (sqrt(v) + eps) + weight_decay*p
    trust = clamp(|p|, 0, 10) / |u|  (1 when either norm is 0, or when adam=True)
    p -= lr * trust * u
(no bias correction, as in torch_npu)."""

import torch

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase, check_hyperparameters

__all__ = ["NpuFusedLamb"]


class NpuFusedLamb(NpuFusedOptimizerBase):
    _state_tensors = {"exp_avg": "zeros", "exp_avg_sq": "zeros"}
    _bucket_update = False  # the trust ratio is per parameter

    def __init__(
        self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, adam=False, use_global_grad_norm=False
    ):
        check_hyperparameters(lr=lr, eps=eps, betas=betas)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.adam = adam
        self.use_global_grad_norm = use_global_grad_norm

    @torch.no_grad()
    def step(self, closure=None):
        self._global_norm = None
        if self.use_global_grad_norm:
            self._ensure_combined()
            grads = [g for g in self.get_combined_grads() if g is not None]
            self._global_norm = sum(g.float().pow(2).sum() for g in grads).sqrt() if grads else None
        return super().step(closure)

    def _update(self, group, params, grads, states):
        beta1, beta2 = group["betas"]
        for p, g, state in zip(params, grads, states):
            if self._global_norm is not None and self._global_norm.item() > 1:
                g = g / self._global_norm
            state["step"] += 1
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            exp_avg.mul_(beta1).add_(g, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            update = exp_avg / exp_avg_sq.sqrt().add(group["eps"])
            if group["weight_decay"] != 0:
                update.add_(p, alpha=group["weight_decay"])
            trust = 1.0
            if not self.adam:
                weight_norm = p.pow(2).sum().sqrt().clamp(0, 10)
                update_norm = update.pow(2).sum().sqrt()
                if weight_norm != 0 and update_norm != 0:
                    trust = (weight_norm / update_norm).item()
            p.add_(update, alpha=-group["lr"] * trust)
