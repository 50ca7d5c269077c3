"""torch_npu.utils.set_asd_loss_scale / register_asd_hook: gradient silent-data-corruption detection
(torch_npu.asd.asd)."""

from torch_npu.asd import asd

__all__ = []


def set_asd_loss_scale(loss_scale=1.0):
    """The loss scale the detector divides float16 gradients by (float16 gradients are judged only once set)."""
    asd.detector.set_asd_loss_scale(loss_scale)


def register_asd_hook(x, weight):
    """Check x's gradient at every backward, with weight's history (no-op when x needs no grad or has hooks)."""
    asd.register_hook(x, weight)
