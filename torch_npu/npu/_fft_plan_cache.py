"""torch.npu.backends.fft_plan_cache: the card's process-wide FFT plan cache (torch_npu/csrc/aten/FftPlans.cpp
says what vnpu keeps in it)."""

from torch_npu import _C

__all__ = ["NPUFFTPlanCache"]


class NPUFFTPlanCache:
    """`size` (plans held, read-only), `max_size` (1 to 99, default 10) and `clear()`."""

    def __getattr__(self, name):
        if name == "size":
            return _C._npu_get_fft_plan_cache_size()
        if name == "max_size":
            return _C._npu_get_fft_plan_cache_max_size()
        raise AttributeError("Unknown attribute " + name)

    def __setattr__(self, name, value):
        if name == "size":
            raise RuntimeError(".size is a read-only property showing the number of plans currently in the cache.")
        if name == "max_size":
            return _C._npu_set_fft_plan_cache_max_size(value)
        raise AttributeError("Unknown attribute " + name)

    def clear(self):
        _C._npu_clear_fft_plan_cache()
