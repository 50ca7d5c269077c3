"""npu_masked_causal_conv1d / npu_masked_causal_conv1d_backward: a per-channel causal 1-D convolution over the
sequence, its output masked per token (MaskedCausalConv1d).

input [S, B, H], weight [W, H] (W = 3), mask bool [B, S] (None = all kept):
    y[s, b, h] = mask[b, s] * sum_k input[s - k, b, h] * weight[W - 1 - k, h]   (input before s = 0 is 0)
The backward masks grad_output the same way and returns (grad_input, grad_weight). Both accumulate in float32
and round once to input's dtype; npu_masked_causal_conv1d is differentiable through the backward operator.
"""

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_masked_causal_conv1d"
_WIDTH = 3


def _check(op, input, weight, mask):
    check(input.dim() == 3, op, f"input must be [S, B, H], got {tuple(input.shape)}")
    seq, batch, hidden = input.shape
    check(
        weight.dim() == 2 and weight.shape[1] == hidden, op, f"weight must be [W, {hidden}], got {tuple(weight.shape)}"
    )
    check(weight.shape[0] == _WIDTH, op, f"the window W must be {_WIDTH}, got {weight.shape[0]}")
    check(weight.dtype == input.dtype, op, f"weight must have input's dtype {input.dtype}, got {weight.dtype}")
    if mask is not None:
        check(mask.dtype == torch.bool, op, f"mask must be bool, got {mask.dtype}")
        check(tuple(mask.shape) == (batch, seq), op, f"mask must be [B, S] = [{batch}, {seq}], got {tuple(mask.shape)}")


def _keep(mask, like):
    """mask [B, S] as a float [S, B, 1] factor (1 everywhere when None)."""
    return torch.ones(1, 1, 1, device=like.device) if mask is None else mask.t().float().unsqueeze(-1)


def _conv(x, weight):
    """sum_k x[s - k] * weight[W - 1 - k] per channel: a depthwise conv1d over S with W - 1 zeros in front."""
    seq, batch, hidden = x.shape
    signal = F.pad(x.permute(1, 2, 0), (weight.shape[0] - 1, 0))
    out = F.conv1d(signal, weight.t().unsqueeze(1), groups=hidden)
    return out.permute(2, 0, 1)


def _setup(ctx, inputs, output, keyword_only_inputs=None):
    ctx.mask = (keyword_only_inputs or {}).get("mask")
    ctx.save_for_backward(*inputs[:2])


def _backward(ctx, grad_output):
    input, weight = ctx.saved_tensors
    return tuple(torch.ops.npu.npu_masked_causal_conv1d_backward(grad_output, input, weight, mask=ctx.mask))


@npu_op(
    "npu_masked_causal_conv1d(Tensor input, Tensor weight, *, Tensor? mask=None) -> Tensor",
    backward=_backward,
    setup_context=_setup,
)
def npu_masked_causal_conv1d(input, weight, *, mask=None):  # noqa: A002 - op-plugin's argument name
    """y [S, B, H]: the causal per-channel convolution, masked per token."""
    _check(_OP, input, weight, mask)
    return (_conv(input.float(), weight.float()) * _keep(mask, input)).to(input.dtype)


def _backward_fake(grad_output, input, weight, *, mask=None):  # noqa: A002
    return torch.empty_like(input), torch.empty_like(weight)


@npu_op(
    "npu_masked_causal_conv1d_backward(Tensor grad_output, Tensor input, Tensor weight, *, Tensor? mask=None) "
    "-> (Tensor, Tensor)",
    fake=_backward_fake,
)
def npu_masked_causal_conv1d_backward(grad_output, input, weight, *, mask=None):  # noqa: A002
    """(grad_input [S, B, H], grad_weight [W, H])."""
    op = "npu_masked_causal_conv1d_backward"
    _check(op, input, weight, mask)
    check(
        grad_output.shape == input.shape,
        op,
        f"grad_output must be {tuple(input.shape)}, got {tuple(grad_output.shape)}",
    )
    masked = grad_output.float() * _keep(mask, input)
    # grad_input[s] = sum_k masked[s + k] * weight[W - 1 - k]: the same convolution run backwards in time.
    grad_input = _conv(masked.flip(0), weight.float()).flip(0)
    width = weight.shape[0]
    xf = input.float()
    seq = xf.shape[0]
    rows = [(masked[width - 1 - k :] * xf[: max(seq - (width - 1 - k), 0)]).sum((0, 1)) for k in range(width)]
    return grad_input.to(input.dtype), torch.stack(rows).to(weight.dtype)
