"""NpuFusedAdamP: AdamP (Heo et al., arXiv:2006.08217) on combined buffers.

Adam with bias correction whose update, for parameters of rank > 1 whose gradient is nearly
orthogonal to the weight (|cos| < delta / sqrt(dim) per channel, else per layer), is projected onto
the tangent space of the weight and whose weight decay is then scaled by wd_ratio."""

import math

import torch.nn.functional as F

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase, check_hyperparameters

__all__ = ["NpuFusedAdamP"]


def _channel_view(x):
    return x.reshape(x.size(0), -1)


def _layer_view(x):
    return x.reshape(1, -1)


class NpuFusedAdamP(NpuFusedOptimizerBase):
    _state_tensors = {"exp_avg": "zeros", "exp_avg_sq": "zeros"}
    _bucket_update = False  # the projection is per parameter

    def __init__(
        self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, delta=0.1, wd_ratio=0.1, nesterov=False
    ):
        check_hyperparameters(lr=lr, eps=eps, betas=betas)
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=betas,
                eps=eps,
                weight_decay=weight_decay,
                delta=delta,
                wd_ratio=wd_ratio,
                nesterov=nesterov,
            ),
        )

    def step(self, closure=None):
        return super().step(closure)

    @staticmethod
    def _projection(p, grad, perturb, delta, wd_ratio, eps):
        expand = [-1] + [1] * (p.dim() - 1)
        for view in (_channel_view, _layer_view):
            cosine = F.cosine_similarity(view(grad), view(p), dim=1, eps=eps).abs_()
            if cosine.max() < delta / math.sqrt(view(p).size(1)):
                p_n = p / view(p).norm(dim=1).view(expand).add_(eps)
                perturb = perturb - p_n * view(p_n * perturb).sum(dim=1).view(expand)
                return perturb, wd_ratio
        return perturb, 1.0

    def _update(self, group, params, grads, states):
        beta1, beta2 = group["betas"]
        for p, grad, state in zip(params, grads, states):
            state["step"] += 1
            step = float(state["step"])
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2**step)).add_(group["eps"])
            step_size = group["lr"] / (1 - beta1**step)
            if group["nesterov"]:
                perturb = (beta1 * exp_avg + (1 - beta1) * grad) / denom
            else:
                perturb = exp_avg / denom
            wd_ratio = 1.0
            if p.dim() > 1:
                perturb, wd_ratio = self._projection(p, grad, perturb, group["delta"], group["wd_ratio"], group["eps"])
            if group["weight_decay"] > 0:
                p.mul_(1 - group["lr"] * group["weight_decay"] * wd_ratio)
            p.add_(perturb, alpha=-step_size)
