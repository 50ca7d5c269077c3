"""Activation and softmax operators: npu_swiglu, npu_geglu, npu_gelu, fast_gelu / npu_fast_gelu,
npu_mish, npu_scaled_masked_softmax, npu_dropout_with_add_softmax, npu_clipped_swiglu."""

import math

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check
from torch_npu.ops.dtype_support import FLOATS
from torch_npu.ops.functionalization import functionalized_by
from torch_npu.ops.registration import npu_op

__all__ = []


def _halves(x, dim, op):
    check(-x.dim() <= dim < x.dim(), op, f"dim={dim} is out of range for a {x.dim()}-D input")
    check(x.shape[dim] % 2 == 0, op, f"the size of dim {dim} ({x.shape[dim]}) must be even")
    return x.chunk(2, dim)


@npu_op(
    "npu_swiglu(Tensor self, int dim=-1) -> Tensor", differentiable=True, dtypes={"self": FLOATS}, api="aclnnSwiGlu"
)
def npu_swiglu(x, dim=-1):
    """a, b = x.chunk(2, dim); silu(a) * b (the size of `dim` halves), computed in float32 and rounded once to
    x's dtype as the card's vector unit does."""
    a, b = _halves(x.float(), dim, "npu_swiglu")
    return (F.silu(a) * b).to(x.dtype)


@npu_op(
    "npu_geglu(Tensor self, int dim=-1, int approximate=1, bool activate_left=False) -> (Tensor, Tensor)",
    differentiable=True,
    dtypes={"self": FLOATS},
    api="aclnnGeGlu",
)
def npu_geglu(x, dim=-1, approximate=1, activate_left=False):
    """a, b = x.chunk(2, dim); with activate_left gelu = GELU(a), y = gelu * b, otherwise gelu = GELU(b),
    y = a * gelu. approximate 1 = tanh, 0 = erf. Returns (y, gelu), computed in float32 and each rounded once to
    x's dtype."""
    check(approximate in (0, 1), "npu_geglu", f"approximate must be 0 (erf) or 1 (tanh), got {approximate}")
    a, b = _halves(x.float(), dim, "npu_geglu")
    mode = "tanh" if approximate == 1 else "none"
    gate, other = (a, b) if activate_left else (b, a)
    gelu = F.gelu(gate, approximate=mode)
    return (gelu * other).to(x.dtype), gelu.to(x.dtype)


@npu_op(
    "npu_gelu(Tensor self, *, str approximate='none') -> Tensor",
    differentiable=True,
    dtypes={"self": FLOATS},
    api="aclnnGeluV2",
)
def npu_gelu(x, *, approximate="none"):
    check(approximate in ("none", "tanh"), "npu_gelu", f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return F.gelu(x, approximate=approximate)


def _fast_gelu(x):
    """Atlas A2/A3: x / (1 + exp(-1.702 x)); Atlas 910A/310P: x * exp(0.851 x (x - |x|)) / (1 + exp(-1.702 |x|))."""
    from torch_npu import _C

    xf = x.float()
    if _C._soc_profile()["version"] >= 220:
        out = xf / (1 + torch.exp(-1.702 * xf))
    else:
        out = xf * torch.exp(0.851 * xf * (xf - xf.abs())) / (1 + torch.exp(-1.702 * xf.abs()))
    return out.to(x.dtype)


npu_op("fast_gelu(Tensor self) -> Tensor", differentiable=True)(_fast_gelu)
npu_op("npu_fast_gelu(Tensor self) -> Tensor", differentiable=True)(_fast_gelu)


@npu_op("npu_mish(Tensor self) -> Tensor", differentiable=True, dtypes={"self": FLOATS}, api="aclnnMish")
def npu_mish(x):
    return F.mish(x)


@npu_op(
    "npu_scaled_masked_softmax(Tensor x, Tensor mask, Scalar scale=1, bool fixed_triu_mask=False) -> Tensor",
    differentiable=True,
    dtypes={"x": FLOATS, "mask": (torch.bool,)},
    api="aclnnScaledMaskedSoftmax",
)
def npu_scaled_masked_softmax(x, mask, scale=1, fixed_triu_mask=False):
    """softmax((x * scale).masked_fill(mask, -10000), dim=-1) computed in float32; mask True = masked,
    broadcast to x. fixed_triu_mask=True ignores `mask` and masks the upper triangle (j > i)."""
    check(x.dim() == 4, "npu_scaled_masked_softmax", f"x must be 4-D (N, C, H, W), got {x.dim()}-D")
    if fixed_triu_mask:
        h, w = x.shape[-2:]
        mask = torch.ones(h, w, dtype=torch.bool, device=x.device).triu(1)
    check(mask.dtype == torch.bool, "npu_scaled_masked_softmax", f"mask must be bool, got {mask.dtype}")
    scores = (x.float() * scale).masked_fill(mask, -10000.0)
    return torch.softmax(scores, dim=-1).to(x.dtype)


def _dropout_add_softmax_setup(ctx, inputs, output, keyword_only_inputs=None):
    _, _, alpha, prob, dim = inputs
    mask, softmax_out, _ = output
    ctx.save_for_backward(mask, softmax_out)
    ctx.alpha, ctx.prob, ctx.dim = alpha, prob, dim


def dropout_add_softmax_grads(mask, softmax_out, alpha, prob, dim, grad_dropout=None, grad_softmax=None):
    """(d self, d x1) of npu_dropout_with_add_softmax from its saved mask and softmax output."""
    s = softmax_out
    g = torch.zeros_like(s)
    if grad_dropout is not None:
        g = g + grad_dropout * mask.to(s.dtype) / (1.0 - prob)
    if grad_softmax is not None:
        g = g + grad_softmax
    grad_y = s * (g - (g * s).sum(dim, keepdim=True))
    return grad_y * alpha, grad_y


def _dropout_add_softmax_backward(ctx, grad_mask, grad_softmax, grad_dropout):
    mask, s = ctx.saved_tensors
    grad_self, grad_x1 = dropout_add_softmax_grads(mask, s, ctx.alpha, ctx.prob, ctx.dim, grad_dropout, grad_softmax)
    return grad_self, grad_x1, None, None, None


def npu_dropout_with_add_softmax(self, x1, alpha, prob, dim):
    """y = x1 + alpha * self; softmax_out = softmax(y, dim); dropout_out = softmax_out * mask / (1 - prob)
    with mask uint8 (1 = kept, drawn with probability 1 - prob). Returns (mask, softmax_out, dropout_out)."""
    check(0.0 <= prob < 1.0, "npu_dropout_with_add_softmax", f"prob must be in [0, 1), got {prob}")
    check(
        self.shape == x1.shape,
        "npu_dropout_with_add_softmax",
        f"self {tuple(self.shape)} and x1 {tuple(x1.shape)} differ",
    )
    softmax_out = torch.softmax(x1 + alpha * self, dim=dim)
    mask = torch.empty_like(softmax_out, dtype=torch.uint8).bernoulli_(1.0 - prob)
    return mask, softmax_out, softmax_out * mask / (1.0 - prob)


def _dropout_add_softmax_fake(self, x1, alpha, prob, dim):
    return torch.empty_like(self, dtype=torch.uint8), torch.empty_like(self), torch.empty_like(self)


npu_op(
    "npu_dropout_with_add_softmax(Tensor self, Tensor x1, Scalar alpha, float prob, int dim) "
    "-> (Tensor, Tensor, Tensor)",
    fake=_dropout_add_softmax_fake,
    backward=_dropout_add_softmax_backward,
    setup_context=_dropout_add_softmax_setup,
)(npu_dropout_with_add_softmax)


@npu_op("npu_silu(Tensor self) -> Tensor", differentiable=True, dtypes={"self": FLOATS}, api="aclnnSilu")
def npu_silu(x):
    """x * sigmoid(x)."""
    return F.silu(x)


@npu_op("npu_silu_(Tensor(a!) self) -> Tensor(a!)", dtypes={"self": FLOATS}, api="aclnnInplaceSilu")
def npu_silu_(x):
    """npu_silu in place."""
    return x.copy_(F.silu(x))


functionalized_by("npu_silu_", "npu_silu")


@npu_op(
    "npu_gelu_mul(Tensor input, *, str approximate='none') -> Tensor",
    differentiable=True,
    dtypes={"input": FLOATS},
    api="aclnnGeluMul",
)
def npu_gelu_mul(x, *, approximate="none"):
    """GELU of the left half of the last dimension times its right half (aclnnGeluMul); approximate is
    'none' (erf) or 'tanh'."""
    op = "npu_gelu_mul"
    check(approximate in ("none", "tanh"), op, f"approximate must be 'none' or 'tanh', got {approximate!r}")
    check(2 <= x.dim() <= 8, op, f"input must have 2 to 8 dimensions, got {x.dim()}")
    check(x.shape[-1] % 2 == 0, op, f"the last dimension of input ({x.shape[-1]}) must be even")
    left, right = x.float().chunk(2, -1)
    return (F.gelu(left, approximate=approximate) * right).to(x.dtype)  # float32, rounded once


@npu_op(
    "npu_clipped_swiglu(Tensor x, *, Tensor? group_index=None, int dim=-1, float alpha=1.702, float limit=7.0, "
    "float bias=1.0, bool interleaved=True) -> Tensor",
    differentiable=True,
    dtypes={"x": FLOATS},
    api="aclnnClippedSwiglu",
)
def npu_clipped_swiglu(x, *, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0, interleaved=True):
    """GPT-OSS's clipped SwiGLU: x is viewed as [pre, rest] (pre = the dims before `dim`); rest is split into A
    and B (even / odd elements when interleaved, else halves); A = min(A, limit), B = clamp(B, -limit, limit),
    y = A * sigmoid(alpha * A) * (B + bias), in float32, returned in x's dtype with `dim` halved. With
    group_index only the first sum(group_index) rows of pre are computed; the others are 0."""
    op = "npu_clipped_swiglu"
    dim = dim % x.dim() if x.dim() else 0
    check(x.shape[dim] % 2 == 0, op, f"the size of dim {dim} ({x.shape[dim]}) must be even")
    out_shape = list(x.shape)
    out_shape[dim] //= 2
    rows = x.reshape(math.prod(x.shape[:dim]), -1).float()
    a, b = (rows[:, ::2], rows[:, 1::2]) if interleaved else rows.chunk(2, -1)
    a = a.clamp(max=limit)
    y = a * torch.sigmoid(alpha * a) * (b.clamp(-limit, limit) + bias)
    if group_index is not None:
        y = torch.where(torch.arange(y.shape[0], device=y.device)[:, None] < group_index.sum(), y, 0.0)
    return y.to(x.dtype).reshape(out_shape)
