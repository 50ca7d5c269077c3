"""The gradient silent-data-corruption detector behind torch_npu.utils.set_asd_loss_scale / register_asd_hook.

A hook on a tensor's gradient takes the gradient's norm and runs `_npu_silent_check` with that weight's history
(previous, smallest and largest norm). The first checks only build the history: a gradient is judged once the
detector has seen `_MIN_STEPS` rounds of checks. float16 gradients are judged only after set_asd_loss_scale()
(they are unscaled by it first). NPU_ASD_UPPER_THRESH / NPU_ASD_SIGMA_THRESH ("<level 1>,<level 2>", each at
least 3, level 1 above level 2, read once) set the absolute and relative thresholds; unusable values fall back
to the defaults (1000000,10000 and 100000,5000). With NPU_ASD_ENABLE=1, layer_norm inputs and embedding weights
get the hook at every call (the patch registry installs that).
"""

import os

import torch

import torch_npu
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = []

_MIN_STEPS = 7


class _History:
    """One weight's history on the device: previous, smallest and largest gradient norm."""

    def __init__(self, device):
        self.pre_val = torch.tensor(0.0, device=device)
        self.min_val = torch.tensor(1e10, device=device)
        self.max_val = torch.tensor(-1e10, device=device)
        self.upper, self.sigma = torch_npu._C._silent_check_thresholds()


class SilentFaultDetector:
    def __init__(self):
        self.histories = {}
        self.loss_scale = 1.0
        self.loss_scale_set = False
        self.checks = 0
        self.rounds = 0

    def set_asd_loss_scale(self, loss_scale=1.0):
        if loss_scale == 0:
            raise ValueError("loss scale cannot be 0." + pta_error(ErrCode.VALUE))
        self.loss_scale_set = True
        self.loss_scale = loss_scale

    def check(self, key, grad):
        if grad.dtype == torch.float16:
            if not self.loss_scale_set:
                return None
            grad = grad.float() / self.loss_scale
        history = self.histories.get(key)
        if history is None:
            history = self.histories[key] = _History(grad.device)
        if self.rounds <= _MIN_STEPS:
            self.checks += 1
            self.rounds = self.checks // (len(self.histories) + 1)
            step = 0
        else:
            step = _MIN_STEPS
        counter = torch.tensor(step, dtype=torch.int32, device=grad.device)
        return torch.ops.npu._npu_silent_check(
            grad, torch.norm(grad), history.pre_val, history.min_val, history.max_val, counter, _MIN_STEPS,
            history.upper[0], history.sigma[0], history.upper[1], history.sigma[1],
        )  # fmt: skip

    def hook_for(self, weight):
        key = id(weight)

        def hook(grad):
            self.check(key, grad)

        return hook


detector = SilentFaultDetector()


def register_hook(x, weight):
    """The detector's hook on x's gradient, keyed by weight (once: not when x already has hooks)."""
    if x is not None and x.requires_grad and x._backward_hooks is None:
        x.register_hook(detector.hook_for(weight))


def check_layer_norm_and_embedding():
    """NPU_ASD_ENABLE (non-zero): F.layer_norm inputs and F.embedding weights get the detector's hook at every
    call, keyed by the layer norm's weight / the embedding weight. True when installed by this call."""
    import torch.nn.functional as F

    if os.environ.get("NPU_ASD_ENABLE", "0") in ("", "0") or getattr(F.layer_norm, "__vnpu_asd__", False):
        return False
    layer_norm, embedding = F.layer_norm, F.embedding

    def checked_layer_norm(input, normalized_shape, weight=None, *args, **kwargs):
        register_hook(input, weight)
        return layer_norm(input, normalized_shape, weight, *args, **kwargs)

    def checked_embedding(input, weight, *args, **kwargs):
        register_hook(weight, weight)
        return embedding(input, weight, *args, **kwargs)

    for checked, original in ((checked_layer_norm, layer_norm), (checked_embedding, embedding)):
        checked.__name__, checked.__doc__, checked.__vnpu_asd__ = original.__name__, original.__doc__, True
    F.layer_norm, F.embedding = checked_layer_norm, checked_embedding
    return True
