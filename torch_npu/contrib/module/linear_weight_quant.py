"""LinearWeightQuant: float activations x int8 weights dequantised on the fly
(torch_npu.npu_weight_quant_batchmatmul semantics)."""

import torch
from torch import nn

__all__ = ["LinearWeightQuant"]


class LinearWeightQuant(nn.Module):
    """y = x @ ((weight + antiquant_offset) * antiquant_scale)^T + bias, computed in x's dtype;
    with quant_scale the result is requantised to int8 (y * quant_scale + quant_offset). With
    antiquant_group_size g > 0 the scales are per group of g input channels ([ceil(in/g), out])."""

    def __init__(
        self,
        in_features,
        out_features,
        bias: bool = True,
        device=None,
        dtype=None,
        antiquant_offset: bool = False,
        quant_scale: bool = False,
        quant_offset: bool = False,
        antiquant_group_size: int = 0,
        inner_precise: int = 0,
        weight_dtype=None,
    ) -> None:
        super().__init__()
        dtype = dtype or torch.float16
        self.in_features, self.out_features = in_features, out_features
        self.antiquant_group_size = antiquant_group_size
        self.inner_precise = inner_precise
        self.weight = nn.Parameter(
            torch.empty(out_features, in_features, dtype=weight_dtype or torch.int8, device=device), False
        )
        scale_shape = (
            (out_features,) if antiquant_group_size <= 0 else (-(-in_features // antiquant_group_size), out_features)
        )
        self.antiquant_scale = nn.Parameter(torch.empty(scale_shape, dtype=dtype, device=device), False)
        self.antiquant_offset = (
            nn.Parameter(torch.empty(scale_shape, dtype=dtype, device=device), False) if antiquant_offset else None
        )
        self.quant_scale = (
            nn.Parameter(torch.empty(out_features, dtype=torch.float32, device=device), False) if quant_scale else None
        )
        self.quant_offset = (
            nn.Parameter(torch.empty(out_features, dtype=torch.float32, device=device), False) if quant_offset else None
        )
        self.bias = nn.Parameter(torch.empty(out_features, dtype=dtype, device=device), False) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import torch_npu

        return torch_npu.npu_weight_quant_batchmatmul(
            x,
            self.weight.t(),
            self.antiquant_scale,
            self.antiquant_offset,
            self.quant_scale,
            self.quant_offset,
            self.bias,
            self.antiquant_group_size,
            self.inner_precise,
        )
