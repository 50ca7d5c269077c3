"""Normalisation operators (torch_npu's npu_rms_norm family, npu_add_layer_norm, npu_deep_norm,
npu_group_norm_silu). Statistics are computed in float32, as on the NPU; outputs take the input's
dtype; rstd/mean outputs are float32 with the normalised dims kept as size 1."""

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check, reduced_dims, require
from torch_npu.ops.dtype_support import FLOATS
from torch_npu.ops.registration import npu_op

__all__ = ["rms_statistics"]


def rms_statistics(x, gamma, epsilon, op):
    """(x in float32, rstd over gamma's trailing dims, kept as size-1 dims)."""
    check(
        x.shape[x.dim() - gamma.dim() :] == gamma.shape,
        op,
        f"gamma shape {tuple(gamma.shape)} must match the last dims of x {tuple(x.shape)}",
    )
    dims = reduced_dims(x, gamma.dim(), op, "gamma")
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dims, keepdim=True) + epsilon)
    return xf, rstd


@npu_op(
    "npu_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
    differentiable=True,
    dtypes={"self": FLOATS, "gamma": FLOATS},
    api="aclnnRmsNorm",
)
def npu_rms_norm(x, gamma, epsilon=1e-6):
    """y = x / sqrt(mean(x^2 over gamma's dims) + epsilon) * gamma; returns (y, rstd)."""
    xf, rstd = rms_statistics(x, gamma, epsilon, "npu_rms_norm")
    return (xf * rstd * gamma.float()).to(x.dtype), rstd


@npu_op(
    "npu_add_rms_norm(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor, Tensor)",
    dtypes={"x1": FLOATS, "x2": FLOATS, "gamma": FLOATS},
    api="aclnnAddRmsNorm",
)
def npu_add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    """x = x1 + x2; returns (rms_norm(x) * gamma, rstd, x)."""
    check(x1.shape == x2.shape, "npu_add_rms_norm", f"x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} differ")
    x = x1 + x2
    xf, rstd = rms_statistics(x, gamma, epsilon, "npu_add_rms_norm")
    return (xf * rstd * gamma.float()).to(x1.dtype), rstd, x


@npu_op(
    "npu_gemma_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
    dtypes={"self": FLOATS, "gamma": FLOATS},
    api="aclnnGemmaRmsNorm",
)
def npu_gemma_rms_norm(x, gamma, epsilon=1e-6):
    """Gemma's RMSNorm: y = x * rstd * (1 + gamma); returns (y, rstd)."""
    xf, rstd = rms_statistics(x, gamma, epsilon, "npu_gemma_rms_norm")
    return (xf * rstd * (1.0 + gamma.float())).to(x.dtype), rstd


def _layer_norm_stats(x, trailing, epsilon, op):
    dims = reduced_dims(x, trailing, op, "gamma")
    xf = x.float()
    mean = xf.mean(dims, keepdim=True)
    var = (xf - mean).pow(2).mean(dims, keepdim=True)
    return xf, mean, torch.rsqrt(var + epsilon)


@npu_op(
    "npu_deep_norm(Tensor x, Tensor gx, Tensor beta, Tensor gamma, float alpha=0.3, float epsilon=1e-06) "
    "-> (Tensor, Tensor, Tensor)",
    differentiable=True,
    dtypes={"x": FLOATS, "gx": FLOATS, "beta": FLOATS, "gamma": FLOATS},
    api="aclnnDeepNorm",
)
def npu_deep_norm(x, gx, beta, gamma, alpha=0.3, epsilon=1e-6):
    """DeepNorm: z = alpha * x + gx; y = (z - mean) * rstd * gamma + beta; returns (mean, rstd, y)."""
    check(x.shape == gx.shape, "npu_deep_norm", f"x {tuple(x.shape)} and gx {tuple(gx.shape)} differ")
    z = alpha * x.float() + gx.float()
    zf, mean, rstd = _layer_norm_stats(z, gamma.dim(), epsilon, "npu_deep_norm")
    y = ((zf - mean) * rstd * gamma.float() + beta.float()).to(x.dtype)
    return mean, rstd, y


@npu_op(
    "npu_add_layer_norm(Tensor x1, Tensor x2, Tensor gamma, Tensor beta, float epsilon=1e-05, "
    "bool additional_output=False) -> (Tensor, Tensor, Tensor, Tensor)",
    differentiable=True,
    dtypes={"x1": FLOATS, "x2": FLOATS, "gamma": FLOATS, "beta": FLOATS},
    api="aclnnAddLayerNorm",
)
def npu_add_layer_norm(x1, x2, gamma, beta, epsilon=1e-5, additional_output=False):
    """x = x1 + x2; returns (layer_norm(x) * gamma + beta, mean, rstd, x). The sum x is returned when
    additional_output is True; otherwise the fourth output is an empty tensor (it is not computed)."""
    check(x1.shape == x2.shape, "npu_add_layer_norm", f"x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} differ")
    x = x1 + x2
    xf, mean, rstd = _layer_norm_stats(x, gamma.dim(), epsilon, "npu_add_layer_norm")
    # Mixed x1 / x2 dtypes (fp16 + fp32) add in the wider one, and y comes out in it, as on the card.
    y = ((xf - mean) * rstd * gamma.float() + beta.float()).to(x.dtype)
    return y, mean, rstd, (x if additional_output else x.new_empty(0))


@npu_op(
    "npu_group_norm_silu(Tensor input, Tensor? weight, Tensor? bias, int group, float eps=0.00001) "
    "-> (Tensor, Tensor, Tensor)",
    dtypes={"input": FLOATS, "weight": FLOATS, "bias": FLOATS},
    api="aclnnGroupNormSilu",
)
def npu_group_norm_silu(input, weight, bias, group, eps=1e-5):  # noqa: A002
    """silu(group_norm(input)); returns (out, mean [N, group], rstd [N, group]) in input's dtype."""
    check(
        input.dim() >= 2 and input.shape[1] % group == 0,
        "npu_group_norm_silu",
        f"group={group} must divide the channels ({input.shape[1] if input.dim() > 1 else '?'})",
    )
    n = input.shape[0]
    grouped = input.float().reshape(n, group, -1)
    mean = grouped.mean(-1)
    rstd = torch.rsqrt(grouped.var(-1, unbiased=False) + eps)
    out = F.silu(
        F.group_norm(
            input.float(),
            group,
            None if weight is None else weight.float(),
            None if bias is None else bias.float(),
            eps,
        )
    ).to(input.dtype)
    return out, mean.to(input.dtype), rstd.to(input.dtype)


@npu_op(
    "npu_group_norm_swish(Tensor input, int num_groups, Tensor weight, Tensor bias, float? eps=1e-5, "
    "float? swish_scale=1.0) -> (Tensor, Tensor, Tensor)",
    differentiable=True,
    dtypes={"input": FLOATS, "weight": FLOATS, "bias": FLOATS},
    api="aclnnGroupNormSwish",
)
def npu_group_norm_swish(input, num_groups, weight, bias, eps=1e-5, swish_scale=1.0):  # noqa: A002
    """swish(group_norm(input)) with swish(z) = z * sigmoid(swish_scale * z), statistics in fp32; returns
    (out, mean [N, num_groups], rstd [N, num_groups]) in input's dtype."""
    op = "npu_group_norm_swish"
    check(
        input.dim() >= 2 and input.shape[1] % num_groups == 0,
        op,
        f"num_groups={num_groups} must divide the channels ({input.shape[1] if input.dim() > 1 else '?'})",
    )
    eps = 1e-5 if eps is None else eps
    swish_scale = 1.0 if swish_scale is None else swish_scale
    n = input.shape[0]
    grouped = input.float().reshape(n, num_groups, -1)
    mean = grouped.mean(-1)
    rstd = torch.rsqrt(grouped.var(-1, unbiased=False) + eps)
    normed = F.group_norm(input.float(), num_groups, weight.float(), bias.float(), eps)
    out = (normed * torch.sigmoid(normed * swish_scale)).to(input.dtype)
    return out, mean.to(input.dtype), rstd.to(input.dtype)


@npu_op(
    "npu_layer_norm_eval(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
    "float eps=1e-05) -> Tensor",
    dtypes={"input": FLOATS},
    api="aclnnLayerNorm",
)
def npu_layer_norm_eval(x, normalized_shape, weight=None, bias=None, eps=1e-05):
    """Layer normalisation for inference: the output only (no mean / rstd for a backward)."""
    return torch.nn.functional.layer_norm(x, list(normalized_shape), weight, bias, eps)


def _normalize_batch_fake(x, seq_len, normalize_type=0):
    return torch.empty_like(x)


@npu_op(
    "npu_normalize_batch(Tensor self, Tensor seq_len, int normalize_type=0) -> Tensor",
    fake=_normalize_batch_fake,
)
def npu_normalize_batch(x, seq_len, normalize_type=0):
    """x [n, c, d] normalised with the statistics of each sample's first seq_len[i] steps along d:
    (x - mean) / (std + 1e-5), std unbiased; per feature c (normalize_type 0) or over all features (1)."""
    require(
        seq_len.dim() == 1,
        f"Non-empty 1D seq_len tensor expected but got a tensor with sizes {list(seq_len.shape)}",
    )
    require(
        seq_len.size(0) == x.size(0),
        f"seq_len's length should be equal self' num, but got seq_len length {seq_len.size(0)}self num {x.size(0)}",
    )
    require(normalize_type in (0, 1), f"normalize_type expected to be in range [0, 1], but got {normalize_type}")
    steps = torch.arange(x.shape[-1], device=x.device)
    valid = (steps < seq_len.long().unsqueeze(-1)).unsqueeze(1).expand_as(x)  # [n, c, d]
    dims = (-1,) if normalize_type == 0 else (1, 2)
    count = valid.sum(dims, keepdim=True)
    mean = torch.where(valid, x, 0).sum(dims, keepdim=True) / count
    var = torch.where(valid, (x - mean) ** 2, 0).sum(dims, keepdim=True) / (count - 1)
    return (x - mean) / (var.sqrt() + 1e-5)


@npu_op("batch_norm_reduce(Tensor input, float eps) -> (Tensor, Tensor)")
def batch_norm_reduce(x, eps):
    """SyncBatchNorm's local statistics: the per-channel (dim 1) sum and sum of squares over every other
    dimension, accumulated in float32 ((sum, square_sum), each [C]); eps is carried for the reduction that
    follows and does not enter these sums."""
    check(x.dim() >= 2, "batch_norm_reduce", f"input must have a channel dimension (2-D or more), got {x.dim()}-D")
    dims = [d for d in range(x.dim()) if d != 1]
    values = x.float()
    return values.sum(dims), (values * values).sum(dims)


@npu_op(
    "batch_norm_gather_stats_update(Tensor input, Tensor mean, Tensor invstd, Tensor? running_mean, "
    "Tensor? running_var, float momentum, float eps, Tensor counts) -> (Tensor, Tensor)",
    fake=lambda x, mean, invstd, running_mean, running_var, momentum, eps, counts: (
        mean.new_empty(mean.shape[-1]),
        invstd.new_empty(invstd.shape[-1]),
    ),
)
def batch_norm_gather_stats_update(x, mean, invstd, running_mean, running_var, momentum, eps, counts):
    """SyncBatchNorm's gathered statistics: every rank's (mean [R, C], invstd [R, C], counts [R]) combined into
    the global (mean, invstd), and running_mean / running_var (unbiased variance) updated with momentum in place,
    as torch.batch_norm_gather_stats_with_counts does."""
    return torch.batch_norm_gather_stats_with_counts(x, mean, invstd, running_mean, running_var, momentum, eps, counts)
