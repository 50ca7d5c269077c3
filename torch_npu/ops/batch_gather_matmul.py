"""npu_batch_gather_matmul(_): batched LoRA (BGMV). Row i of x goes through the adapter indices[i] at layer
layer_idx: (x[i] @ weight_a[a, l]^T) @ weight_b[a, l]^T * scale, added to columns y_offset.. of y[i] (as wide
as y_slice_size, or all of y's columns when -1). Without weight_a, weight_b [W, L, H2, H1] multiplies x directly.
An index equal to W (one past the adapters) is a row without adapter: nothing is added. The in-place form
writes into self and functionalizes to the out-of-place one."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.functionalization import functionalized_by
from torch_npu.ops.registration import npu_op

__all__ = []

_ARGS = (
    "Tensor x, Tensor weight_b, Tensor indices, Tensor? weight_a=None, int layer_idx=0, float scale=1e-3, "
    "int y_offset=0, int y_slice_size=-1"
)


def _gathered(weights, idx, layer_idx):
    """weights[idx, layer_idx] with an all-zero adapter at index W."""
    padded = torch.cat([weights, weights.new_zeros(1, *weights.shape[1:])])
    return padded[idx, layer_idx]


def _lora_delta(op, y, x, weight_b, indices, weight_a, layer_idx, scale, y_offset, y_slice_size):
    check(y.dim() == 2 and x.dim() == 2 and y.shape[0] == x.shape[0], op, "self and x must be 2-D with one batch size")
    check(weight_b.dim() == 4, op, f"weight_b must be 4-D [W, L, H2, R], got {weight_b.dim()}-D")
    adapters = weight_b.shape[0]
    check(0 <= layer_idx < weight_b.shape[1], op, f"layer_idx={layer_idx} must be in [0, {weight_b.shape[1]})")
    idx = indices.long()
    check(
        bool(((idx >= 0) & (idx <= adapters)).all()),
        op,
        f"indices must be in [0, {adapters}] ({adapters}: no adapter)",
    )
    width = y.shape[1] if y_slice_size == -1 else y_slice_size
    check(
        weight_b.shape[2] == width and 0 <= y_offset and y_offset + width <= y.shape[1],
        op,
        f"weight_b's H2={weight_b.shape[2]} must fill columns {y_offset}..{y_offset + width} of self ({y.shape[1]} wide)",
    )
    hidden = x.unsqueeze(1)
    if weight_a is not None:
        hidden = torch.bmm(hidden, _gathered(weight_a, idx, layer_idx).transpose(-1, -2))
    delta = torch.bmm(hidden, _gathered(weight_b, idx, layer_idx).transpose(-1, -2)).squeeze(1) * scale
    return delta.to(y.dtype), width


@npu_op(f"npu_batch_gather_matmul(Tensor self, {_ARGS}) -> Tensor")
def npu_batch_gather_matmul(
    y, x, weight_b, indices, weight_a=None, layer_idx=0, scale=1e-3, y_offset=0, y_slice_size=-1
):
    delta, width = _lora_delta(
        "npu_batch_gather_matmul", y, x, weight_b, indices, weight_a, layer_idx, scale, y_offset, y_slice_size
    )
    out = y.clone()
    out[:, y_offset : y_offset + width] += delta
    return out


@npu_op(f"npu_batch_gather_matmul_(Tensor(a!) self, {_ARGS}) -> Tensor(a!)")
def npu_batch_gather_matmul_(
    y, x, weight_b, indices, weight_a=None, layer_idx=0, scale=1e-3, y_offset=0, y_slice_size=-1
):
    delta, width = _lora_delta(
        "npu_batch_gather_matmul_", y, x, weight_b, indices, weight_a, layer_idx, scale, y_offset, y_slice_size
    )
    y[:, y_offset : y_offset + width] += delta
    return y


functionalized_by("npu_batch_gather_matmul_", "npu_batch_gather_matmul")
