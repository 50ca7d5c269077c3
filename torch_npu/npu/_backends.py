"""torch.npu.backends' switches, with torch_npu's behaviour: the scaled-dot-product-attention switches set
PyTorch's global flags and warn, as torch_npu does, that the card's attention operators do not read them; the
linear-algebra library choice is not implemented."""

import contextlib
import warnings

import torch

__all__ = [
    "flash_sdp_enabled",
    "enable_flash_sdp",
    "mem_efficient_sdp_enabled",
    "enable_mem_efficient_sdp",
    "math_sdp_enabled",
    "enable_math_sdp",
    "sdp_kernel",
    "preferred_linalg_library",
]


def _only_global(kind):
    warnings.warn(f"Currently, the device operator does not support {kind} sdp and only sets Global variable!")


def _switch(kind, get, set_):
    """The (query, setter) pair of one attention switch."""

    def enabled() -> bool:
        _only_global(kind)
        return get()

    def enable(enabled: bool) -> None:
        _only_global(kind)
        set_(enabled)

    enabled.__name__, enable.__name__ = f"{kind}_sdp_enabled", f"enable_{kind}_sdp"
    enabled.__qualname__, enable.__qualname__ = enabled.__name__, enable.__name__
    return enabled, enable


flash_sdp_enabled, enable_flash_sdp = _switch("flash", torch._C._get_flash_sdp_enabled, torch._C._set_sdp_use_flash)
mem_efficient_sdp_enabled, enable_mem_efficient_sdp = _switch(
    "mem_efficient", torch._C._get_mem_efficient_sdp_enabled, torch._C._set_sdp_use_mem_efficient
)
math_sdp_enabled, enable_math_sdp = _switch("math", torch._C._get_math_sdp_enabled, torch._C._set_sdp_use_math)


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True):
    """Sets the three switches for the block and restores them after it."""
    _only_global("flash、math、mem_efficient")
    previous = flash_sdp_enabled(), mem_efficient_sdp_enabled(), math_sdp_enabled()
    try:
        enable_flash_sdp(enable_flash)
        enable_mem_efficient_sdp(enable_mem_efficient)
        enable_math_sdp(enable_math)
        yield {}
    finally:
        enable_flash_sdp(previous[0])
        enable_mem_efficient_sdp(previous[1])
        enable_math_sdp(previous[2])


def preferred_linalg_library(backend=None) -> torch._C._LinalgBackend:
    """Not implemented on the card: warns and answers Default whatever is asked."""
    warnings.warn("torch.npu.preferred_linalg_library isn't implemented!")
    return torch._C._LinalgBackend.Default
