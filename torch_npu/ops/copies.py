"""Copying operators: npu_stride_copy(.out) (a strided window of self, copied contiguous), npu_view_copy (other
copied into self, a view), npu_dtype_cast_ (src cast into self's dtype, in place), reverse (flip along axes) and
npu_transpose_trans_contiguous.out (self permuted, copied contiguous into out)."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []


def _window(x, shape, stride, storage_offset, op):
    check(len(shape) == len(stride), op, f"shape and stride must have one length, got {list(shape)} and {list(stride)}")
    offset = int(storage_offset)
    check(offset >= 0 and all(s >= 0 for s in stride), op, "stride and storage_offset must be non-negative")
    last = offset + sum((n - 1) * s for n, s in zip(shape, stride) if n > 0)
    available = x.untyped_storage().nbytes() // x.element_size()
    check(all(n == 0 for n in shape) or last < available, op,
          f"the window (shape {list(shape)}, stride {list(stride)}, offset {offset}) exceeds self's storage of {available} elements")  # fmt: skip
    return x.as_strided(shape, stride, offset)


@npu_op(
    "npu_stride_copy(Tensor self, int[] shape, int[] stride, Scalar storage_offset) -> Tensor",
    fake=lambda x, shape, stride, storage_offset: x.new_empty(shape),
)
def npu_stride_copy(x, shape, stride, storage_offset):
    """The elements of self's storage at offset + sum(i_d * stride_d), as a contiguous tensor of `shape`."""
    return _window(x, shape, stride, storage_offset, "npu_stride_copy").clone(memory_format=torch.contiguous_format)


@npu_op(
    "npu_stride_copy.out(Tensor self, int[] shape, int[] stride, Scalar storage_offset, *, Tensor(a!) out) "
    "-> Tensor(a!)",
    fake=lambda x, shape, stride, storage_offset, *, out: out,
)
def npu_stride_copy_out(x, shape, stride, storage_offset, *, out):
    window = _window(x, shape, stride, storage_offset, "npu_stride_copy")
    out.resize_(window.shape)
    return out.copy_(window)


@npu_op(
    "npu_view_copy(Tensor(a!) self, Tensor other, bool non_blocking) -> Tensor(a!)",
    fake=lambda x, other, non_blocking: x,
)
def npu_view_copy(x, other, non_blocking):
    """other copied into self (a view: the base tensor sees the values); self returned."""
    return x.copy_(other, non_blocking=non_blocking)


@npu_op("npu_dtype_cast_(Tensor(a!) self, Tensor src) -> Tensor(a!)", fake=lambda x, src: x)
def npu_dtype_cast_(x, src):
    """src cast to self's dtype and broadcast into self; self returned."""
    return x.copy_(src)


@npu_op("reverse(Tensor self, int[] axis) -> Tensor", fake=lambda x, axis: torch.empty_like(x))
def reverse(x, axis):
    """self with the order of the given axes reversed."""
    for a in axis:
        check(-x.dim() <= a < max(x.dim(), 1), "reverse", f"axis {a} is out of range for a {x.dim()}-D tensor")
    return torch.flip(x, list(axis))


@npu_op(
    "npu_transpose_trans_contiguous.out(Tensor self, int[] perm, bool require_contiguous=True, *, Tensor(a!) out) "
    "-> Tensor(a!)",
    fake=lambda x, perm, require_contiguous=True, *, out: out,
)
def npu_transpose_trans_contiguous_out(x, perm, require_contiguous=True, *, out):
    """self.permute(perm) copied into out (resized to the permuted shape); out returned."""
    op = "npu_transpose_trans_contiguous"
    check(sorted(int(p) % max(x.dim(), 1) for p in perm) == list(range(x.dim())), op,
          f"perm must be a permutation of the {x.dim()} dims, got {list(perm)}")  # fmt: skip
    permuted = x.permute(*perm)
    out.resize_(permuted.shape)
    return out.copy_(permuted)
