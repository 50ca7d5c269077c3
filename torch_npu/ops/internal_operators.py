"""The underscore operators of op-plugin's schema list that torch_npu's own Python calls: _npu_dtype_cast (+
_backward), _amp_foreach_non_finite_check (GradScaler's inf / nan test), _npu_ciou (CIoU with the atan difference
its backward reads), _npu_moe_token_unpermute (the unpermuted tokens and the tokens kept for the backward),
_quantize_per_tensor_impl.out / _quantize_per_channel_impl.out (torch.quantize_per_tensor / _per_channel's integer
values, zero_point + round-half-even(x / scale) clamped to the quantised dtype's range) and the aclgraph capture helpers of npu_fusion_attention_v3 / _grad_v3 (_infer_output allocates the outputs a call will
write, _get_max_workspace the scratch memory its .out overload takes: none on the host)."""

import torch

from torch_npu.npu import _overflow
from torch_npu.ops import boxes, fusion_attention_v3, moe  # noqa: F401  (the operators these build on)
from torch_npu.ops._common import check
from torch_npu.ops.fusion_attention import fusion_attention_fake
from torch_npu.ops.registration import npu_op

__all__ = []

_NPU = torch.ops.npu


@npu_op(
    "_npu_dtype_cast(Tensor self, ScalarType dtype) -> Tensor",
    fake=lambda x, dtype: x.new_empty(x.shape, dtype=dtype),
    backward=lambda ctx, grad: (_NPU._npu_dtype_cast_backward(grad, ctx.source), None),
    setup_context=lambda ctx, inputs, output, keyword_only_inputs=None: setattr(ctx, "source", inputs[0].dtype),
)
def _npu_dtype_cast(x, dtype):
    """x converted to dtype; the gradient goes back through _npu_dtype_cast_backward."""
    return x.to(dtype)


@npu_op(
    "_npu_dtype_cast_backward(Tensor grad, ScalarType dtype) -> Tensor",
    fake=lambda grad, dtype: grad.new_empty(grad.shape, dtype=dtype),
)
def _npu_dtype_cast_backward(grad, dtype):
    """grad converted back to the forward input's dtype."""
    return grad.to(dtype)


@npu_op("_amp_foreach_non_finite_check(Tensor[] scaled_grads) -> bool", fake=lambda scaled_grads: False)
def _amp_foreach_non_finite_check(scaled_grads):
    """True when any of the gradients holds an inf or a nan; on saturation-mode SoCs, as torch_npu's kernel
    there, when the float-status register is set (by any operator since the last clear; it is cleared)."""
    if not _overflow.is_support_inf_nan():
        return _overflow.take_float_status()
    return any(not bool(torch.isfinite(g).all()) for g in scaled_grads if g.numel())


@npu_op(
    "_npu_ciou(Tensor self, Tensor gtboxes, bool trans=False, bool is_cross=True, int mode=0, "
    "bool atan_sub_flag=False) -> (Tensor, Tensor)",
    fake="composition",
)
def _npu_ciou(x, gtboxes, trans=False, is_cross=True, mode=0, atan_sub_flag=False):
    """(npu_ciou, atan(wg/hg) - atan(w/h)) of the box pairs."""
    return boxes.ciou_with_atan_difference(x, gtboxes, trans, is_cross, mode, "_npu_ciou")


@npu_op(
    "_npu_moe_token_unpermute(Tensor permuted_tokens, Tensor sorted_indices, Tensor? probs=None, "
    "bool padded_mode=False, int[]? restore_shape=None) -> (Tensor unpermuted_tokens, "
    "Tensor permuted_tokens_for_backward)",
    fake=lambda permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None: (
        _NPU.npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs, padded_mode, restore_shape),
        torch.empty_like(permuted_tokens),
    ),
)
def _npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    """(npu_moe_token_unpermute's result, a copy of permuted_tokens for the backward)."""
    unpermuted = _NPU.npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs, padded_mode, restore_shape)
    return unpermuted, permuted_tokens.clone()


@npu_op(
    "_npu_fusion_attention_v3_infer_output(Tensor query, Tensor key, Tensor value, int head_num, "
    "str input_layout) -> (Tensor, Tensor, Tensor)",
    fake="composition",
)
def _npu_fusion_attention_v3_infer_output(query, key, value, head_num, input_layout):
    """Empty (attention_score, softmax_max, softmax_sum) of the shapes npu_fusion_attention_v3 returns."""
    return tuple(fusion_attention_fake(query, key, value, head_num, input_layout)[:3])


@npu_op(
    "_npu_fusion_attention_grad_v3_infer_output(Tensor query, Tensor key, Tensor value, Tensor? pse=None, "
    "Tensor? sink=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake="composition",
)
def _npu_fusion_attention_grad_v3_infer_output(query, key, value, pse=None, sink=None):
    """Empty (dq, dk, dv, dpse, dsink) of the shapes npu_fusion_attention_grad_v3 returns."""
    optional = [query.new_empty(0) if t is None else torch.empty_like(t) for t in (pse, sink)]
    return (torch.empty_like(query), torch.empty_like(key), torch.empty_like(value), *optional)


_QUANTISED_RANGES = {torch.qint8: (-128, 127), torch.quint8: (0, 255), torch.qint32: (-(2**31), 2**31 - 1)}


def _quantised_into(result, inputs, scales, zero_points, dtype, op):
    check(dtype in _QUANTISED_RANGES, op, f"dtype must be torch.qint8, torch.quint8 or torch.qint32, got {dtype}")
    low, high = _QUANTISED_RANGES[dtype]
    values = torch.round(inputs.float() / scales.float()) + zero_points.float()
    result.resize_(inputs.shape)
    return result.copy_(values.clamp(low, high).to(result.dtype))


@npu_op(
    "_quantize_per_tensor_impl.out(Tensor inputs, Tensor scales, Tensor zero_points, ScalarType dtype, *, "
    "Tensor(a!) result) -> Tensor(a!)",
    fake=lambda inputs, scales, zero_points, dtype, *, result: result,
)
def _quantize_per_tensor_impl_out(inputs, scales, zero_points, dtype, *, result):
    """One scale and zero point ([1] each) for the whole tensor."""
    return _quantised_into(result, inputs, scales, zero_points, dtype, "_quantize_per_tensor_impl")


@npu_op(
    "_quantize_per_channel_impl.out(Tensor inputs, Tensor scales, Tensor zero_points, int axis, ScalarType dtype, *, "
    "Tensor(a!) result) -> Tensor(a!)",
    fake=lambda inputs, scales, zero_points, axis, dtype, *, result: result,
)
def _quantize_per_channel_impl_out(inputs, scales, zero_points, axis, dtype, *, result):
    """A scale and zero point per index of `axis`."""
    op = "_quantize_per_channel_impl"
    axis = axis % max(inputs.dim(), 1)
    check(scales.numel() == inputs.shape[axis] == zero_points.numel(), op,
          f"scales and zero_points must hold one value per index of axis {axis} ({inputs.shape[axis]})")  # fmt: skip
    shape = [1] * inputs.dim()
    shape[axis] = inputs.shape[axis]
    return _quantised_into(result, inputs, scales.reshape(shape), zero_points.reshape(shape), dtype, op)


def _no_workspace(query, *args, **kwargs):
    """The scratch memory the .out overload takes: the host kernels need none."""
    return query.new_empty(0, dtype=torch.uint8)


def _workspace_schema(name):
    """The get_max_workspace schema: the argument list of the functional operator it sizes."""
    schema = str(getattr(_NPU, name).default._schema)
    return f"_{name}_get_max_workspace({schema[schema.index('(') + 1 : schema.rindex(') -> ')]}) -> Tensor"


for _name in ("npu_fusion_attention_v3", "npu_fusion_attention_grad_v3"):
    npu_op(_workspace_schema(_name), fake=_no_workspace)(_no_workspace)
