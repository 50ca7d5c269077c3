"""npu_scatter_list(_): one scatter per tensor of a list (ScatterList; KV caches kept as one tensor per
sequence), along axis -2 or -1.

For tensor i of `self`: its slice [indices[i], indices[i] + U) along `axis` becomes updates[i], where updates
is [len(self), *var_shape with U at axis]. mask (uint8 [len(self)]) skips tensors whose entry is 0. reduce
'update' is the only reduction. npu_scatter_list returns updated copies; npu_scatter_list_ writes the tensors.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_scatter_list"


def _scattered(tensors, indices, updates, mask, reduce, axis, op):
    check(reduce == "update", op, f"reduce must be 'update', got {reduce!r}")
    check(axis in (-1, -2), op, f"axis must be -1 or -2, got {axis}")
    check(indices.dim() == 1 and indices.numel() == len(tensors), op, f"indices must hold one start per tensor ({len(tensors)}), got {tuple(indices.shape)}")  # fmt: skip
    check(updates.shape[0] == len(tensors), op, f"updates must have {len(tensors)} rows, got {tuple(updates.shape)}")
    check(mask is None or mask.numel() == len(tensors), op, f"mask must hold one entry per tensor ({len(tensors)})")
    results = []
    for i, var in enumerate(tensors):
        update = updates[i]
        check(
            update.dim() == var.dim()
            and all(
                u == v for d, (u, v) in enumerate(zip(update.shape, var.shape)) if d != var.dim() + axis
            ),  # fmt: skip
            op,
            f"updates[{i}] {tuple(update.shape)} does not fit tensor {i} {tuple(var.shape)} along axis {axis}",
        )
        positions = indices[i].long() + torch.arange(update.shape[axis], device=var.device)
        written = var.index_copy(var.dim() + axis, positions, update.to(var.dtype))
        results.append(written if mask is None else torch.where(mask[i] != 0, written, var))
    return results


@npu_op(
    "npu_scatter_list(Tensor[] self, Tensor indices, Tensor updates, Tensor? mask=None, str reduce='update', "
    "int axis=-2) -> Tensor[]"
)
def npu_scatter_list(tensors, indices, updates, mask=None, reduce="update", axis=-2):
    """Updated copies of the tensors."""
    return _scattered(tensors, indices, updates, mask, reduce, axis, _OP)


@npu_op(
    "npu_scatter_list_(Tensor(a!)[] self, Tensor indices, Tensor updates, Tensor? mask=None, str reduce='update', "
    "int axis=-2) -> ()",
    fake=lambda *args, **kwargs: None,
)
def npu_scatter_list_(tensors, indices, updates, mask=None, reduce="update", axis=-2):
    """The tensors updated in place."""
    for var, written in zip(tensors, _scattered(tensors, indices, updates, mask, reduce, axis, "npu_scatter_list_")):
        var.copy_(written)
