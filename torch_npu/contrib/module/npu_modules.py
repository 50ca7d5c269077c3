"""DropoutWithByteMask: nn.Dropout whose mask the NPU keeps as bytes."""

from torch import nn

from torch_npu.contrib.function.npu_functional import dropout_with_byte_mask

__all__ = ["DropoutWithByteMask"]


class DropoutWithByteMask(nn.Module):
    def __init__(self, p=0.5, inplace=False, max_seed=2**10 - 1):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace
        self.max_seed = max_seed

    def forward(self, input1):
        return dropout_with_byte_mask(input1, self.p, self.training, self.inplace)
