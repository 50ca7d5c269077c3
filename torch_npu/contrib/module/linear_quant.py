"""LinearQuant: int8 activations x int8 weights (torch_npu.npu_quant_matmul semantics)."""

import torch
from torch import nn

__all__ = ["LinearQuant"]


class LinearQuant(nn.Module):
    """y = requantize(((x @ weight^T) + bias) * scale [* pertoken_scale] [+ offset]) with x, weight int8,
    bias int32, output int8 when output_dtype is None (else float16/bfloat16/int32 ...)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        bias: bool = True,
        offset: bool = False,
        pertoken_scale: bool = False,
        device=None,
        dtype=None,
        output_dtype=None,
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features, dtype=torch.int8, device=device), False)
        self.scale = nn.Parameter(torch.empty(out_features, dtype=dtype or torch.float32, device=device), False)
        self.offset = (
            nn.Parameter(torch.empty(out_features, dtype=torch.float32, device=device), False) if offset else None
        )
        self.pertoken_scale = (
            nn.Parameter(torch.empty(out_features, dtype=torch.float32, device=device), False)
            if pertoken_scale
            else None
        )
        self.bias = nn.Parameter(torch.empty(out_features, dtype=torch.int32, device=device), False) if bias else None
        self.output_dtype = output_dtype

    def forward(self, linear_quant_input: torch.Tensor) -> torch.Tensor:
        pertoken = None
        if self.pertoken_scale is not None:
            pertoken = self.pertoken_scale[: linear_quant_input.shape[-2]]
        import torch_npu

        return torch_npu.npu_quant_matmul(
            linear_quant_input,
            self.weight.t(),
            self.scale,
            offset=self.offset,
            pertoken_scale=pertoken,
            bias=self.bias,
            output_dtype=self.output_dtype,
        )
