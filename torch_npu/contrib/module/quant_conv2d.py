"""QuantConv2d: int8 convolution (torch_npu.npu_quant_conv2d semantics)."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.utils import _pair

from torch_npu.ops.quant import requantize

__all__ = ["QuantConv2d"]


class QuantConv2d(nn.Module):
    """y = (conv(x, weight) + bias) * scale [+ offset], x and weight int8, bias int32, exact integer
    accumulation, output in output_dtype (float16 on the NPU); round_mode 'rint' applies to int8 output."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        output_dtype: int,
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] = 0,
        dilation: int | tuple[int, int] = 1,
        groups: int = 1,
        bias: bool = True,
        offset: bool = False,
        offset_x: int = 0,
        round_mode: str = "rint",
        input_dtype: int = None,
        weight_dtype: int = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if round_mode != "rint":
            raise ValueError(f"round_mode must be 'rint', but got {round_mode!r}")
        self.kernel_size, self.stride = _pair(kernel_size), _pair(stride)
        self.padding, self.dilation, self.groups = _pair(padding), _pair(dilation), groups
        self.output_dtype, self.offset_x, self.round_mode = output_dtype, offset_x, round_mode
        self.weight = nn.Parameter(
            torch.empty(out_channels, in_channels // groups, *self.kernel_size, dtype=torch.int8, device=device), False
        )
        self.scale = nn.Parameter(torch.empty(out_channels, dtype=dtype or torch.float32, device=device), False)
        self.bias = nn.Parameter(torch.empty(out_channels, dtype=torch.int32, device=device), False) if bias else None
        self.offset = (
            nn.Parameter(torch.empty(out_channels, dtype=torch.float32, device=device), False) if offset else None
        )

    def forward(self, quant_conv2d_input: torch.Tensor) -> torch.Tensor:
        x = quant_conv2d_input.to(torch.float64) - self.offset_x
        acc = F.conv2d(x, self.weight.to(torch.float64), None, self.stride, self.padding, self.dilation, self.groups)
        if self.bias is not None:
            acc = acc + self.bias.to(torch.float64).view(1, -1, 1, 1)
        value = acc.to(torch.float32) * self.scale.to(torch.float32).view(1, -1, 1, 1)
        if self.offset is not None:
            value = value + self.offset.view(1, -1, 1, 1)
        out_dtype = self.output_dtype if isinstance(self.output_dtype, torch.dtype) else torch.float16
        if out_dtype == torch.int8:
            return requantize(value, torch.int8)
        return value.to(out_dtype)
