"""torch.npu.backends: the attention and linear-algebra switches (torch_npu.npu._backends) and the FFT plan
cache."""

from torch_npu.npu._backends import (  # noqa: F401
    enable_flash_sdp,
    enable_math_sdp,
    enable_mem_efficient_sdp,
    flash_sdp_enabled,
    math_sdp_enabled,
    mem_efficient_sdp_enabled,
    preferred_linalg_library,
    sdp_kernel,
)
from torch_npu.npu._fft_plan_cache import NPUFFTPlanCache

__all__ = []

fft_plan_cache = NPUFFTPlanCache()
