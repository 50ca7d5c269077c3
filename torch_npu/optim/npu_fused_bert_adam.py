"""NpuFusedBertAdam: BERT's Adam (no bias correction, per-parameter gradient clipping, warmup
schedules) on combined buffers.

Per parameter: g clipped to norm max_grad_norm (when > 0); m = b1*m + (1-b1)*g;
v = b2*v + (1-b2)*g*g; u = m / (sqrt(v) + e) + weight_decay*p; p -= lr * schedule(step/t_total) * u
(lr unscheduled when t_total == -1). Schedules, x = progress, w = warmup:
warmup_linear: x/w below w, then max((x-1)/(w-1), 0); warmup_constant: x/w below w, then 1;
warmup_cosine: x/w below w, then 0.5*(1+cos(pi*x))."""

import math

import torch
from torch.optim.optimizer import required

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedBertAdam"]


def _warmup_cosine(x, warmup=0.002):
    return x / warmup if x < warmup else 0.5 * (1.0 + math.cos(math.pi * x))


def _warmup_constant(x, warmup=0.002):
    return x / warmup if x < warmup else 1.0


def _warmup_linear(x, warmup=0.002):
    return x / warmup if x < warmup else max((x - 1.0) / (warmup - 1.0), 0.0)


SCHEDULES = {"warmup_cosine": _warmup_cosine, "warmup_constant": _warmup_constant, "warmup_linear": _warmup_linear}


class NpuFusedBertAdam(NpuFusedOptimizerBase):
    _state_tensors = {"next_m": "zeros", "next_v": "zeros"}
    _bucket_update = False  # gradients are clipped per parameter

    def __init__(
        self,
        params,
        lr=required,
        warmup=-1,
        t_total=-1,
        schedule="warmup_linear",
        b1=0.9,
        b2=0.999,
        e=1e-6,
        weight_decay=0.01,
        max_grad_norm=1.0,
    ):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr} - should be >= 0.0")
        if schedule not in SCHEDULES:
            raise ValueError(f"Invalid schedule parameter: {schedule}")
        if not 0.0 <= warmup < 1.0 and warmup != -1:
            raise ValueError(f"Invalid warmup: {warmup} - should be in [0.0, 1.0[ or -1")
        if not 0.0 <= b1 < 1.0:
            raise ValueError(f"Invalid b1 parameter: {b1} - should be in [0.0, 1.0[")
        if not 0.0 <= b2 < 1.0:
            raise ValueError(f"Invalid b2 parameter: {b2} - should be in [0.0, 1.0[")
        if e < 0.0:
            raise ValueError(f"Invalid epsilon value: {e} - should be >= 0.0")
        super().__init__(
            params,
            dict(
                lr=lr,
                schedule=schedule,
                warmup=warmup,
                t_total=t_total,
                b1=b1,
                b2=b2,
                e=e,
                weight_decay=weight_decay,
                max_grad_norm=max_grad_norm,
            ),
        )

    def _scheduled_lr(self, group, step):
        if group["t_total"] == -1:
            return group["lr"]
        return group["lr"] * SCHEDULES[group["schedule"]](step / group["t_total"], group["warmup"])

    def _update(self, group, params, grads, states):
        for p, grad, state in zip(params, grads, states):
            if group["max_grad_norm"] > 0:
                torch.nn.utils.clip_grad_norm_(p, group["max_grad_norm"])
            next_m, next_v = state["next_m"], state["next_v"]
            next_m.mul_(group["b1"]).add_(grad, alpha=1 - group["b1"])
            next_v.mul_(group["b2"]).addcmul_(grad, grad, value=1 - group["b2"])
            update = next_m / (next_v.sqrt() + group["e"])
            if group["weight_decay"] > 0.0:
                update += group["weight_decay"] * p
            p.add_(update, alpha=-self._scheduled_lr(group, float(state["step"])))
            state["step"] += 1
