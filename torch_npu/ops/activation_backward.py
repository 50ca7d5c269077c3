"""The activation and softmax backward operators torch_npu exposes by name: npu_gelu_backward,
npu_fast_gelu_backward, npu_silu_backward, npu_mish_backward, npu_swiglu_backward, npu_rotary_mul_backward (the
vector-Jacobian products of their forwards), npu_scaled_masked_softmax_backward (from the saved output),
npu_dropout_backward (the forward's own bit mask: npu_dropout_do_mask) and npu_dropout_with_add_softmax_backward
(d self = alpha * d y and d x1 = d y from the saved mask and softmax)."""

import torch

from torch_npu.ops.activations import dropout_add_softmax_grads
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import vjp

__all__ = []

_NPU = torch.ops.npu


@npu_op(
    "npu_gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor",
    fake=lambda grad_output, x, *, approximate="none": torch.empty_like(x),
)
def npu_gelu_backward(grad_output, x, *, approximate="none"):
    """d self of npu_gelu."""
    return vjp(lambda t: _NPU.npu_gelu(t, approximate=approximate), [x], [0], [grad_output])[0]


@npu_op("npu_fast_gelu_backward(Tensor grad, Tensor self) -> Tensor", fake=lambda grad, x: torch.empty_like(x))
def npu_fast_gelu_backward(grad, x):
    """d self of npu_fast_gelu."""
    return vjp(_NPU.npu_fast_gelu, [x], [0], [grad])[0]


@npu_op(
    "npu_silu_backward(Tensor grad_output, Tensor x0, Tensor x1) -> Tensor",
    fake=lambda grad_output, x0, x1: torch.empty_like(x0),
)
def npu_silu_backward(grad_output, x0, x1):
    """d x0 of npu_silu(x0) (x1, its saved output, is not needed)."""
    return vjp(_NPU.npu_silu, [x0], [0], [grad_output])[0]


@npu_op("npu_mish_backward(Tensor grad, Tensor input) -> Tensor", fake=lambda grad, x: torch.empty_like(x))
def npu_mish_backward(grad, x):
    """d input of npu_mish."""
    return vjp(_NPU.npu_mish, [x], [0], [grad])[0]


@npu_op(
    "npu_swiglu_backward(Tensor grad_output, Tensor self, int dim=-1) -> Tensor",
    fake=lambda grad_output, x, dim=-1: torch.empty_like(x),
)
def npu_swiglu_backward(grad_output, x, dim=-1):
    """d self of npu_swiglu."""
    return vjp(lambda t: _NPU.npu_swiglu(t, dim), [x], [0], [grad_output])[0]


@npu_op(
    "npu_rotary_mul_backward(Tensor grad, Tensor self, Tensor r1, Tensor r2, str rotary_mode='half') "
    "-> (Tensor, Tensor, Tensor)",
    fake=lambda grad, x, r1, r2, rotary_mode="half": (torch.empty_like(x), torch.empty_like(r1), torch.empty_like(r2)),
)
def npu_rotary_mul_backward(grad, x, r1, r2, rotary_mode="half"):
    """(d self, d r1, d r2) of npu_rotary_mul (r1 / r2 summed over their broadcast dims)."""
    return tuple(vjp(lambda a, b, c: _NPU.npu_rotary_mul(a, b, c, rotary_mode), [x, r1, r2], [0, 1, 2], [grad]))


@npu_op(
    "npu_scaled_masked_softmax_backward(Tensor y_grad, Tensor y, Tensor mask, Scalar scale, bool fixed_triu_mask) "
    "-> Tensor",
    fake=lambda y_grad, y, mask, scale, fixed_triu_mask: torch.empty_like(y),
)
def npu_scaled_masked_softmax_backward(y_grad, y, mask, scale, fixed_triu_mask):
    """d x = scale * y * (dy - sum(dy * y)) from the saved output y, in float32."""
    yf, g = y.float(), y_grad.float()
    return (float(scale) * yf * (g - (g * yf).sum(-1, keepdim=True))).to(y.dtype)


@npu_op(
    "npu_dropout_backward(Tensor grad_output, Tensor mask, float p) -> Tensor",
    fake=lambda grad_output, mask, p: torch.empty_like(grad_output),
)
def npu_dropout_backward(grad_output, mask, p):
    """grad_output kept where the forward's bit mask kept, scaled by 1 / (1 - p)."""
    return _NPU.npu_dropout_do_mask(grad_output, mask, p)[0]


@npu_op(
    "npu_dropout_with_add_softmax_backward(Tensor grad, Tensor mask, Tensor softmax_out, Scalar alpha, float prob, "
    "int dim) -> (Tensor, Tensor)",
    fake=lambda grad, mask, softmax_out, alpha, prob, dim: (
        torch.empty_like(softmax_out),
        torch.empty_like(softmax_out),
    ),  # fmt: skip
)
def npu_dropout_with_add_softmax_backward(grad, mask, softmax_out, alpha, prob, dim):
    """(d self, d x1) of npu_dropout_with_add_softmax's dropout output, in float32."""
    grads = dropout_add_softmax_grads(mask, softmax_out.float(), float(alpha), prob, dim, grad_dropout=grad.float())
    return tuple(g.to(softmax_out.dtype) for g in grads)
