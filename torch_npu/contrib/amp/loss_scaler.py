"""The loss scaler of torch_npu.contrib.amp: static, or dynamic (x0.5 on overflow, x2 after
scale_window clean steps)."""

import torch

__all__ = ["LossScaler"]


class LossScaler:
    def __init__(
        self,
        loss_scale,
        init_scale=2.0**16,
        scale_factor=2.0,
        scale_window=2000,
        min_loss_scale=None,
        max_loss_scale=2.0**24,
        verbose=True,
    ):
        self.dynamic = loss_scale == "dynamic"
        self._scale = min(max_loss_scale, init_scale) if self.dynamic else float(loss_scale)
        self._factor = scale_factor
        self._window = scale_window
        self._min = min_loss_scale
        self._max = max_loss_scale
        self._clean_steps = 0
        self._verbose = verbose

    def loss_scale(self):
        return self._scale

    def unscale_(self, params):
        """Divide the gradients by the scale; True (and the scale lowered) when one is inf or NaN."""
        grads = [p.grad for p in params]
        found_inf = torch.zeros(1, device=grads[0].device) if grads else torch.zeros(1)
        if grads:
            inv = torch.full((1,), 1.0 / self._scale, device=grads[0].device)
            by_dtype = {}
            for g in grads:
                by_dtype.setdefault(g.dtype, []).append(g)
            for group in by_dtype.values():
                torch._amp_foreach_non_finite_check_and_unscale_(group, found_inf, inv)
        overflow = bool(found_inf.item())
        self._update(overflow)
        return overflow

    def _update(self, overflow):
        if not self.dynamic:
            return
        if overflow:
            new = self._scale / self._factor
            self._scale = max(new, self._min) if self._min is not None else new
            self._clean_steps = 0
            if self._verbose:
                print(f"Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {self._scale}")
            return
        self._clean_steps += 1
        if self._clean_steps == self._window:
            self._scale = min(self._max, self._scale * self._factor)
            self._clean_steps = 0

    def state_dict(self):
        return {"loss_scale": self._scale, "unskipped": self._clean_steps}

    def load_state_dict(self, state):
        self._scale = state["loss_scale"]
        self._clean_steps = state["unskipped"]
