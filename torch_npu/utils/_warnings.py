"""torch_npu's warning gate: TORCH_NPU_WARNING_DISABLE=1 (or the deprecated
TORCH_NPU_DISABLED_WARNING=1) silences torch_npu's Python warnings, as does a RANK other than 0."""

import os
import warnings

_warned_once = set()


def should_print_warning() -> bool:
    if os.environ.get("TORCH_NPU_WARNING_DISABLE") == "1" or os.environ.get("TORCH_NPU_DISABLED_WARNING") == "1":
        return False
    rank = os.environ.get("RANK")
    return rank is None or rank == "0"


def npu_warn(message, category=UserWarning, stacklevel=3):
    """warnings.warn behind torch_npu's gate."""
    if should_print_warning():
        warnings.warn(message, category, stacklevel=stacklevel)


def npu_warn_once(key, message, category=UserWarning, stacklevel=3):
    """npu_warn at most once per key and process."""
    if key in _warned_once:
        return
    _warned_once.add(key)
    npu_warn(message, category, stacklevel=stacklevel + 1)
