"""The base of torch_npu's fused optimizers.

On its first step a fused optimizer combines, per parameter group and dtype, the parameters, their
gradients and every optimizer state into contiguous buffers (npu_combine_tensors): each parameter,
gradient and state tensor becomes a view into its bucket's buffer. A step then updates a whole bucket
with one sequence of operators. The element-wise arithmetic is the same as the matching
torch.optim optimizer's, so results are equal to it. A bucket whose parameters are not all ready
(some without a gradient, or with differing step counts) is updated parameter by parameter through
the same views, exactly as torch.optim would.

Keep gradients in place: ``zero_grad()`` zeroes them (set_to_none defaults to False), and gradients
that were replaced are copied back into the combined buffer before the step.
"""

from collections import defaultdict

import torch
from torch.optim.optimizer import Optimizer, required

from torch_npu.utils.combine_tensors import npu_combine_tensors

__all__ = ["NpuFusedOptimizerBase"]


def check_hyperparameters(lr=None, eps=None, betas=(), momentum=None, weight_decay=None, alpha=None):
    """torch.optim's argument checks, shared by the fused optimizers."""
    for name, value in (
        ("learning rate", lr),
        ("epsilon value", eps),
        ("momentum value", momentum),
        ("weight_decay value", weight_decay),
        ("alpha value", alpha),
    ):
        if value is not None and value is not required and value < 0.0:
            raise ValueError(f"Invalid {name}: {value}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")


class _Bucket:
    """Parameters of one group and dtype, and their combined buffers."""

    def __init__(self, params):
        self.params = params
        self.param = npu_combine_tensors(params)
        self.grad = None
        self.states = {}


class NpuFusedOptimizerBase(Optimizer):
    # name -> "zeros" | "ones": per-parameter state tensors, combined per bucket like the parameters.
    _state_tensors = {}
    # whether a whole bucket may be updated at once (False for per-parameter algorithms: Lamb, AdamP).
    _bucket_update = True

    def __init__(self, params, default):
        super().__init__(params, default)
        self._buckets = None

    # --- combining -------------------------------------------------------------------------
    def _combine(self):
        self._buckets = []
        for group in self.param_groups:
            by_dtype = defaultdict(list)
            for p in group["params"]:
                if p.requires_grad:
                    by_dtype[(p.dtype, p.device)].append(p)
            buckets = [_Bucket(ps) for ps in by_dtype.values()]
            for bucket in buckets:
                self._combine_grads(bucket)
                self._combine_states(bucket)
            self._buckets.append(buckets)

    def _combine_grads(self, bucket):
        bucket.grad = torch.zeros_like(bucket.param)
        offset = 0
        for p in bucket.params:
            n = p.numel()
            if p.grad is not None:
                bucket.grad[offset : offset + n].copy_(p.grad.reshape(-1))
            p.grad = bucket.grad[offset : offset + n].view_as(p) if p.grad is not None else None
            offset += n

    def _combine_states(self, bucket):
        for name, init in self._state_tensors.items():
            flat = torch.ones_like(bucket.param) if init == "ones" else torch.zeros_like(bucket.param)
            bucket.states[name] = flat
            offset = 0
            for p in bucket.params:
                n = p.numel()
                self.state[p][name] = flat[offset : offset + n].view_as(p)
                offset += n
        for p in bucket.params:
            self.state[p].setdefault("step", torch.tensor(0.0))

    def _sync_grads(self, bucket):
        """Point every gradient back into the combined buffer (autograd may have replaced one)."""
        offset = 0
        for p in bucket.params:
            n = p.numel()
            view = bucket.grad[offset : offset + n]
            if p.grad is not None and (p.grad.data_ptr() != view.data_ptr() or p.grad.shape != p.shape):
                view.copy_(p.grad.reshape(-1))
                p.grad = view.view_as(p)
            offset += n

    def get_combined_params(self):
        """The combined parameter buffers, one per parameter group and dtype."""
        self._ensure_combined()
        return [b.param for buckets in self._buckets for b in buckets]

    def get_combined_grads(self):
        """The combined gradient buffers, one per parameter group and dtype."""
        self._ensure_combined()
        for buckets in self._buckets:
            for bucket in buckets:
                self._sync_grads(bucket)
        return [b.grad for buckets in self._buckets for b in buckets]

    def _ensure_combined(self):
        if self._buckets is None:
            self._combine()

    # --- stepping --------------------------------------------------------------------------
    def zero_grad(self, set_to_none=False):
        if set_to_none or self._buckets is None:
            return super().zero_grad(set_to_none=set_to_none)
        for buckets in self._buckets:
            for bucket in buckets:
                self._sync_grads(bucket)
                bucket.grad.zero_()

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._ensure_combined()
        for group, buckets in zip(self.param_groups, self._buckets):
            for bucket in buckets:
                self._sync_grads(bucket)
                self._step_bucket(group, bucket)
        return loss

    def _step_bucket(self, group, bucket):
        steps = {float(self.state[p]["step"]) for p in bucket.params}
        if self._bucket_update and len(steps) == 1 and all(p.grad is not None for p in bucket.params):
            step = torch.tensor(steps.pop())
            state = dict(bucket.states, step=step)
            self._update(group, [bucket.param], [bucket.grad], [state])
            for p in bucket.params:
                self.state[p]["step"] = step.clone()
            return
        ready = [p for p in bucket.params if p.grad is not None]
        if ready:
            self._update(group, ready, [p.grad for p in ready], [self.state[p] for p in ready])

    def _update(self, group, params, grads, states):
        """Apply one step to `params` (each a parameter or a whole bucket) with their `states`."""
        raise NotImplementedError

    # --- gradient clipping -----------------------------------------------------------------
    @torch.no_grad()
    def clip_grad_norm_fused_(self, max_norm, norm_type=2):
        """Clip the gradients of all parameters by their total norm (as torch.nn.utils.clip_grad_norm_),
        scaling the combined gradient buffers in place. Returns the total norm."""
        grads = self.get_combined_grads()
        per_param = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
        if not per_param:
            return torch.tensor(0.0)
        norm_type = float(norm_type)
        norms = [torch.linalg.vector_norm(g, norm_type) for g in per_param]
        total = torch.linalg.vector_norm(torch.stack(norms), norm_type)
        clip_coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(clip_coef.to(g.device))
        return total
