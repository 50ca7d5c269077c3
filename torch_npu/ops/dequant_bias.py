"""npu_dequant_bias: int32 matmul results to float16 / bfloat16 (DequantBias).

    y = A * weight_scale * activation_scale                    without bias
    y = (A + bias) * weight_scale * activation_scale           int32 bias (added before dequantising)
    y = A * weight_scale * activation_scale + bias             float bias (added after)

x (A) [M, N] int32, weight_scale [N] (float32 / bfloat16), activation_scale [M] float32 (None: 1), bias [N].
Computed in float32; output_dtype float16 (the default) or bfloat16.
"""

import torch

from torch_npu.ops._common import check, dtype_of
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_dequant_bias"


def _output_dtype(output_dtype):
    dtype = torch.float16 if output_dtype is None else dtype_of(output_dtype, _OP, "output_dtype")
    check(
        dtype in (torch.float16, torch.bfloat16),
        _OP,
        f"output_dtype must be torch.float16 or torch.bfloat16, got {dtype}",
    )
    return dtype


@npu_op(
    "npu_dequant_bias(Tensor x, Tensor weight_scale, Tensor? activation_scale, Tensor? bias, *, "
    "ScalarType? output_dtype=None) -> Tensor",
    fake=lambda x, weight_scale, activation_scale, bias, *, output_dtype=None: x.new_empty(
        x.shape, dtype=_output_dtype(output_dtype)
    ),
)
def npu_dequant_bias(x, weight_scale, activation_scale, bias, *, output_dtype=None):
    """Dequantised [M, N] in output_dtype (float16 by default)."""
    dtype = _output_dtype(output_dtype)
    check(x.dtype == torch.int32 and x.dim() == 2, _OP, f"x must be a 2-D int32 tensor, got {x.dim()}-D {x.dtype}")
    m, n = x.shape
    check(weight_scale.shape == (n,), _OP, f"weight_scale must be [N={n}], got {tuple(weight_scale.shape)}")
    check(activation_scale is None or activation_scale.shape == (m,), _OP, f"activation_scale must be [M={m}]")
    check(
        bias is None or bias.shape == (n,),
        _OP,
        f"bias must be [N={n}], got {None if bias is None else tuple(bias.shape)}",
    )
    scale = weight_scale.float() * (1.0 if activation_scale is None else activation_scale.float()[:, None])
    if bias is not None and bias.dtype == torch.int32:
        return ((x + bias).float() * scale).to(dtype)
    y = x.float() * scale
    return (y if bias is None else y + bias.float()).to(dtype)
