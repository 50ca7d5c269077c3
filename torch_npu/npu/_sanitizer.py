"""torch_npu's sanitizer (TORCH_NPU_SANITIZER set, or enable_npu_sanitizer()): checks that work on different
npu streams is ordered by events, wait_stream or synchronisation wherever the card would need it, and raises
on the first access that could race (see _stream_check). Every operator then passes through Python, so it is a
debugging tool, off by default.

torch_npu first tries its kernel check, which swaps in the card's debug kernels from ASCEND_OPP_DEBUG_PATH;
vnpu has none, so enable_kernel_check() reports False (warning when the variable is set) and the stream check
runs instead, as torch_npu's does when the kernel check is unavailable."""

import atexit
import os
import warnings

import torch_npu

__all__ = ["enable_npu_sanitizer"]


class SanitizerMode:
    STREAM = 0
    KERNEL = 1


class NPUSanitizer:
    def __init__(self):
        self.event_handler = None
        self.dispatch = None
        self.mode = SanitizerMode.STREAM
        self.enabled = False

    def __del__(self):
        if self.dispatch is not None:
            self.dispatch.__exit__(None, None, None)

    def enable(self):
        if self.enabled:
            return
        if self.enable_kernel_check():
            self.mode = SanitizerMode.KERNEL
        else:
            self.mode = SanitizerMode.STREAM
            self._enable_stream_check()
        torch_npu._C._activate_npu_trace(self.mode)
        atexit.register(torch_npu._C._deactivate_npu_trace)  # memory freed at exit is not traced
        self.enabled = True

    def enable_kernel_check(self) -> bool:
        """Whether the card's debug kernels (ASCEND_OPP_DEBUG_PATH) can check each kernel: never on vnpu."""
        if os.getenv("ASCEND_OPP_DEBUG_PATH"):
            warnings.warn(
                "ASCEND_OPP_DEBUG_PATH is set, but the kernel check runs the card's debug kernels and vnpu has none; "
                "TORCH_NPU_SANITIZER runs the stream check instead."
            )
        return False

    def _enable_stream_check(self):
        from torch_npu.npu import _stream_check
        from torch_npu.utils import _npu_trace as trace

        handler = _stream_check.NPURecordStreamHandler()
        for point, _, _ in trace.POINTS:  # the handler has a _handle_<point> for each
            register = getattr(trace, f"register_callback_for_npu_{point}")
            register(getattr(handler, f"_handle_{point}"), f"handle_{point}")
        trace.register_callback_for_npu_erase_stream(handler._handle_erase_stream, "handle_erase_stream")
        self.event_handler = handler
        self.dispatch = _stream_check.NPUSanitizerDispatchMode(handler)
        self.dispatch.__enter__()


def enable_npu_sanitizer():
    """Check every later operator on npu for accesses that streams could run out of order on the card."""
    npu_sanitizer.enable()


npu_sanitizer = NPUSanitizer()
