"""The normalisation backward operators torch_npu exposes by name, from the forward's saved statistics:
npu_rms_norm_backward (y = x * rstd * gamma), _npu_rms_norm_backward_quant (the same with d x (in x's dtype)
quantised statically: round(dx / scale_x + offset_x) with div_mode, round(dx * scale_x + offset_x) without, to int8 (the
default dst_type 1) or torch_npu.hifloat8 (290, uint8 codes)), npu_add_layer_norm_backward (y = LayerNorm(x1 + x2); the same
gradient for x1 and x2, plus dsum when given) and npu_deep_norm_backward (y = LayerNorm(alpha * x + gx)).
Computed in float32 and rounded to the inputs' dtypes."""

import torch

from torch_npu._c_children import DTypeNumber
from torch_npu.ops._common import check
from torch_npu.ops.quant import requantize
from torch_npu.ops.registration import npu_op
from torch_npu.utils import hifloat8

__all__ = []


def _leading(x, gamma):
    """The dims gamma does not cover (summed for its gradient)."""
    return tuple(range(x.dim() - gamma.dim()))


def _normalised(x, gamma):
    """(gamma's dims of x, how many elements they hold, the shape a saved per-row statistic broadcasts as)."""
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    count = 1
    for d in dims:
        count *= x.shape[d]
    return dims, count, x.shape[: x.dim() - gamma.dim()] + (1,) * gamma.dim()


@npu_op(
    "npu_rms_norm_backward(Tensor dy, Tensor self, Tensor gamma, Tensor rstd) -> (Tensor, Tensor)",
    fake=lambda dy, x, gamma, rstd: (torch.empty_like(x), torch.empty_like(gamma, dtype=torch.float32)),
)
def npu_rms_norm_backward(dy, x, gamma, rstd):
    """(d self, d gamma (float32))."""
    dx, dgamma = _rms_norm_grads(dy, x, gamma, rstd)
    return dx.to(x.dtype), dgamma


def _rms_norm_grads(dy, x, gamma, rstd):
    """(d x, d gamma) of y = x * rstd * gamma, both float32."""
    dims, count, kept = _normalised(x, gamma)
    xf, g, r = x.float(), dy.float() * gamma.float(), rstd.float().reshape(kept)
    dx = r * (g - xf * r * r * (g * xf).sum(dims, keepdim=True) / count)
    return dx, (dy.float() * xf * r).sum(_leading(x, gamma))


_QUANT_OP = "_npu_rms_norm_backward_quant"


def _quant_dst(dst_type):
    hifloat = int(DTypeNumber.hifloat8)
    check(dst_type in (None, 1, hifloat), _QUANT_OP, f"dst_type must be 1 (torch.int8) or {hifloat} (torch_npu.hifloat8), got {dst_type}")  # fmt: skip
    return torch.uint8 if dst_type == hifloat else torch.int8


@npu_op(
    "_npu_rms_norm_backward_quant(Tensor dy, Tensor x, Tensor rstd, Tensor gamma, Tensor scale_x, *, "
    'Tensor? offset_x=None, bool? div_mode=True, str quant_mode="static", int? dst_type=1) -> (Tensor, Tensor)',
    fake=lambda dy, x, rstd, gamma, scale_x, *, offset_x=None, div_mode=True, quant_mode="static", dst_type=1: (
        dy.new_empty(dy.shape, dtype=_quant_dst(dst_type)),
        gamma.new_empty(gamma.shape, dtype=torch.float32),
    ),  # fmt: skip
)
def _npu_rms_norm_backward_quant(dy, x, rstd, gamma, scale_x, *, offset_x=None, div_mode=True, quant_mode="static",
                                 dst_type=1):  # fmt: skip
    """(d x quantised, d gamma (float32)); see the module doc."""
    check(quant_mode == "static", _QUANT_OP, f"quant_mode must be 'static' (the only mode of RmsNormGradQuant), got '{quant_mode}'")  # fmt: skip
    dst = _quant_dst(dst_type)
    dx, dgamma = _rms_norm_grads(dy, x, gamma, rstd)
    dx = dx.to(x.dtype).float()  # quantised from d x in x's dtype, as op-plugin's reference splices the two operators
    scale = scale_x.float()
    dx = dx / scale if div_mode is None or div_mode else dx * scale
    if offset_x is not None:
        dx = dx + offset_x.float()
    return (hifloat8.encode(dx) if dst == torch.uint8 else requantize(dx, torch.int8)), dgamma


def _layer_norm_backward(dy, z, gamma, mean, rstd):
    """(d z, d gamma, d beta) of LayerNorm over gamma's dims with saved mean / rstd, float32."""
    dims, count, kept = _normalised(z, gamma)
    r = rstd.float().reshape(kept)
    xhat = (z - mean.float().reshape(kept)) * r
    g = dy.float() * gamma.float()
    dz = r * (g - g.mean(dims, keepdim=True) - xhat * (g * xhat).sum(dims, keepdim=True) / count)
    lead = _leading(z, gamma)
    return dz, (dy.float() * xhat).sum(lead), dy.float().sum(lead)


@npu_op(
    "npu_add_layer_norm_backward(Tensor? dy_opt, Tensor x1, Tensor x2, Tensor rstd, Tensor mean, Tensor gamma, "
    "Tensor? dsum_opt) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=lambda dy, x1, x2, rstd, mean, gamma, dsum: (
        torch.empty_like(x1),
        torch.empty_like(x2),
        torch.empty_like(gamma, dtype=torch.float32),
        torch.empty_like(gamma, dtype=torch.float32),
    ),  # fmt: skip
)
def npu_add_layer_norm_backward(dy_opt, x1, x2, rstd, mean, gamma, dsum_opt):
    """(d x1, d x2, d gamma, d beta)."""
    z = x1.float() + x2.float()
    dy = dy_opt if dy_opt is not None else torch.zeros_like(z)
    dz, dgamma, dbeta = _layer_norm_backward(dy, z, gamma, mean, rstd)
    if dsum_opt is not None:
        dz = dz + dsum_opt.float()
    return dz.to(x1.dtype), dz.to(x2.dtype), dgamma, dbeta


@npu_op(
    "npu_deep_norm_backward(Tensor dy, Tensor x, Tensor gx, Tensor gamma, Tensor mean, Tensor rstd, "
    "float alpha=0.3) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=lambda dy, x, gx, gamma, mean, rstd, alpha=0.3: (
        torch.empty_like(x),
        torch.empty_like(gx),
        torch.empty_like(gamma, dtype=torch.float32),
        torch.empty_like(gamma, dtype=torch.float32),
    ),  # fmt: skip
)
def npu_deep_norm_backward(dy, x, gx, gamma, mean, rstd, alpha=0.3):
    """(d x, d gx, d beta, d gamma) of LayerNorm(alpha * x + gx)."""
    z = alpha * x.float() + gx.float()
    dz, dgamma, dbeta = _layer_norm_backward(dy, z, gamma, mean, rstd)
    return (dz * alpha).to(x.dtype), dz.to(gx.dtype), dbeta, dgamma
