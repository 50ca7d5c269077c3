"""dropout_with_byte_mask: dropout whose mask the NPU keeps as bytes (npu::dropout_with_byte_mask on npu tensors;
F.dropout elsewhere, which draws the same mask from the same seed)."""

import torch
import torch.nn.functional as F

__all__ = ["dropout_with_byte_mask"]


def dropout_with_byte_mask(input1, p=0.5, training=True, inplace=False):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input1.device.type != "npu" or not training:
        return F.dropout(input1, p=p, training=training, inplace=inplace)
    result = torch.ops.npu.dropout_with_byte_mask(input1, p, training)
    return input1.copy_(result) if inplace else result
