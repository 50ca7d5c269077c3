"""``torch.npu.amp.GradScaler``: dynamic (or static) loss scaling for npu.

Ascend 910B and later SoCs support IEEE inf/nan, so gradients are checked with
``torch._amp_foreach_non_finite_check_and_unscale_`` exactly as on CUDA.
"""

from collections import defaultdict

import torch
from torch.amp.grad_scaler import _refresh_per_optimizer_state

__all__ = ["GradScaler"]


class GradScaler(torch.amp.GradScaler):
    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        dynamic: bool = True,
        enabled: bool = True,
    ) -> None:
        super().__init__(
            "npu",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )
        self._dynamic = dynamic
        self._has_overflow = False

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        # torch_npu: once one optimizer found inf/nan, every step() of the iteration is skipped until update()
        if sum(v.item() for v in optimizer_state["found_inf_per_device"].values()):
            self._has_overflow = True
        if self._has_overflow:
            if self._dynamic:
                print("Gradient overflow. Skipping step")
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        if not self._enabled:
            return
        self._has_overflow = False
        if not self._dynamic and new_scale is None:
            # Static loss scale: the scale never changes, only the per-step state is reset.
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)
            return
        before = float(self._scale.item()) if self._scale is not None else None
        super().update(new_scale)
        after = float(self._scale.item())
        if before is not None and new_scale is None and after != before:
            # torch_npu reports every dynamic change of the loss scale.
            print(f"Loss scaler {'reducing' if after < before else 'increasing'} loss scale to {after}")

    @staticmethod
    def get_npu_overflow_flag():
        """The device's float-status overflow flag (saturation-mode SoCs; see torch.npu.get_npu_overflow_flag)."""
        from torch_npu.npu._overflow import get_npu_overflow_flag

        return get_npu_overflow_flag()

    @staticmethod
    def clear_npu_overflow_flag():
        from torch_npu.npu._overflow import clear_npu_overflow_flag

        clear_npu_overflow_flag()

    def state_dict(self):
        state = super().state_dict()
        if self._enabled:
            state["dynamic"] = self._dynamic
        return state

    def load_state_dict(self, state_dict):
        self._dynamic = state_dict.get("dynamic", self._dynamic)
        super().load_state_dict({k: v for k, v in state_dict.items() if k != "dynamic"})
