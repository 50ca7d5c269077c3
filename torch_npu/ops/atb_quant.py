"""op-plugin's ATB quantisation operators (vllm-ascend's W8A8 path; torch.ops.atb.*, also torch_npu.<name>), each
writing its int8 result into `output` / `y`:

_npu_quant_rms_norm: y = x / rms(x) * gamma + beta, then round(y / scale + offset), all in float32 (the fused
kernel never rounds y to the input dtype), saturated to int8; gamma and beta are [hidden] or [1, hidden].
_npu_quantize_per_tensor: round(x / scale) + zero_point saturated to int8, the quotient in x's dtype as the
card's element-wise kernel computes it (an empty zero_point adds nothing). Integers round half to even."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.norms import rms_statistics
from torch_npu.ops.quant import requantize
from torch_npu.ops.registration import npu_op

__all__ = []


def _check_output(output, x, op, name):
    check(output.dtype == torch.int8, op, f"{name} must be int8, got {output.dtype}")
    check(output.shape == x.shape, op, f"{name} must have x's shape {tuple(x.shape)}, got {tuple(output.shape)}")


@npu_op(
    "atb::_npu_quant_rms_norm(Tensor self, Tensor gamma, Tensor beta, Tensor scale, Tensor offset, "
    "Tensor(a!) output, float eps=1e-05) -> ()"
)
def _npu_quant_rms_norm(self, gamma, beta, scale, offset, output, eps=1e-5):
    """output = int8(round((self / rms(self) * gamma + beta) / scale + offset))."""
    op = "_npu_quant_rms_norm"
    _check_output(output, self, op, "output")
    hidden = self.shape[-1]
    for tensor, name in ((gamma, "gamma"), (beta, "beta")):
        check(tensor.numel() == hidden, op, f"{name} must hold {hidden} values (x's last dim), got {tuple(tensor.shape)}")  # fmt: skip
    xf, rstd = rms_statistics(self, gamma.reshape(-1), eps, op)
    y = xf * rstd * gamma.reshape(-1).float() + beta.reshape(-1).float()
    output.copy_(requantize(y / scale.float() + offset.float(), torch.int8))


@npu_op("atb::_npu_quantize_per_tensor(Tensor x, Tensor scale, Tensor zero_point, Tensor(a!) y) -> ()")
def _npu_quantize_per_tensor(x, scale, zero_point, y):
    """y = int8(round(x / scale) + zero_point), scale and zero_point broadcast against x."""
    _check_output(y, x, "_npu_quantize_per_tensor", "y")
    quotient = torch.round(x / scale.to(x.dtype))
    if zero_point.numel():
        quotient = quotient + zero_point.to(x.dtype)
    y.copy_(requantize(quotient.float(), torch.int8))
