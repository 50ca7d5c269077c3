"""Helpers shared by npu AMP."""

import torch

__all__ = ["amp_definitely_not_available"]


def amp_definitely_not_available():
    """True when npu AMP cannot work: no npu device is visible."""
    return not torch.npu.is_available()
