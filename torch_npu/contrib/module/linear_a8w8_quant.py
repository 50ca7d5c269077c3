"""LinearA8W8Quant: the int8-activation, int8-weight linear layer (same as LinearQuant)."""

from torch_npu.contrib.module.linear_quant import LinearQuant

__all__ = ["LinearA8W8Quant"]


class LinearA8W8Quant(LinearQuant):
    """See LinearQuant."""
