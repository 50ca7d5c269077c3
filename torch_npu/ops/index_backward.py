"""The indexing backward operators torch_npu exposes by name: npu_max_backward / npu_min_backward (the gradient
back at the picked indices), npu_gather_backward, npu_gather_sparse_index_backward (through _npu_index_add_, the
row accumulation op-plugin builds it on), repeat_interleave_backward_int / _tensor (segment sums) and
npu_renorm_backward."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.functionalization import functionalized_by
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import vjp

__all__ = []


def _picked_backward(grad, dim, indices, sizes, keepdim):
    """d self of npu_max / npu_min: grad put back at the picked indices along dim, zeros elsewhere."""
    if not keepdim:
        grad, indices = grad.unsqueeze(dim), indices.unsqueeze(dim)
    return grad.new_zeros(sizes).scatter(dim, indices.long(), grad)


for _name in ("npu_max_backward", "npu_min_backward"):
    npu_op(
        f"{_name}(Tensor grad, int dim, Tensor indices, SymInt[] sizes, bool keepdim) -> Tensor",
        fake=lambda grad, dim, indices, sizes, keepdim: grad.new_empty(sizes),
    )(_picked_backward)


@npu_op(
    "npu_gather_backward(Tensor grad, SymInt[] self_size, int dim, Tensor index, bool sparse_grad) -> Tensor",
    fake=lambda grad, self_size, dim, index, sparse_grad: grad.new_empty(self_size),
)
def npu_gather_backward(grad, self_size, dim, index, sparse_grad):
    """d self of torch.gather: grad added back at index along dim (a dense result; sparse_grad is refused)."""
    check(not sparse_grad, "npu_gather_backward", "sparse_grad=True is not supported")
    return grad.new_zeros(self_size).scatter_add(dim, index.long(), grad)


@npu_op(
    "npu_gather_sparse_index_backward(Tensor grad, SymInt[] self_sizes, Tensor index) -> Tensor",
    fake=lambda grad, self_sizes, index: grad.new_empty(self_sizes),
)
def npu_gather_sparse_index_backward(grad, self_sizes, index):
    """d input of npu_gather_sparse_index: each output row added into the table row it came from."""
    return _npu_index_add_(grad.new_zeros(self_sizes), index, grad)


def _add_rows(self, index, source, alpha):
    """self's rows index[i] (any shape, flattened) gain alpha * source's rows (source [*index.shape, *self[1:]]),
    in order — duplicates add up."""
    rows = source.reshape(-1, *self.shape[1:])
    check(rows.shape[0] == index.numel(), "_npu_index_add", f"source holds {rows.shape[0]} rows of self's shape, index {index.numel()}")  # fmt: skip
    return self.index_add_(0, index.reshape(-1).long(), rows.to(self.dtype), alpha=alpha)


@npu_op(
    "_npu_index_add(Tensor self, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor",
    fake=lambda self, index, source, alpha=1: torch.empty_like(self),
)
def _npu_index_add(self, index, source, *, alpha=1):
    """self.index_add(0, index, source, alpha=alpha) over flattened index and source rows."""
    return _add_rows(self.clone(), index, source, alpha)


@npu_op("_npu_index_add_(Tensor(a!) self, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor(a!)")
def _npu_index_add_(self, index, source, *, alpha=1):
    """_npu_index_add in place."""
    return _add_rows(self, index, source, alpha)


functionalized_by("_npu_index_add_", "_npu_index_add")


def _segment_sums(grad, x, dim, counts):
    source = grad.reshape(-1) if dim is None else grad
    axis = 0 if dim is None else dim
    size = x.numel() if dim is None else x.shape[dim]
    segment = torch.repeat_interleave(torch.arange(size, device=grad.device), counts)
    shape = list(source.shape)
    shape[axis] = size
    summed = source.new_zeros(shape).index_add(axis, segment, source)
    return summed.reshape(x.shape)


@npu_op(
    "repeat_interleave_backward_int(Tensor grad, Tensor self, SymInt repeats, int? dim=None) -> Tensor",
    fake=lambda grad, x, repeats, dim=None: torch.empty_like(x),
)
def repeat_interleave_backward_int(grad, x, repeats, dim=None):
    """d self of torch.repeat_interleave(self, repeats, dim): each run of `repeats` copies summed."""
    check(repeats >= 0, "repeat_interleave_backward_int", f"repeats must be non-negative, got {repeats}")
    return _segment_sums(grad, x, dim, repeats)


@npu_op(
    "repeat_interleave_backward_tensor(Tensor grad, Tensor self, Tensor repeats, int? dim=None) -> Tensor",
    fake=lambda grad, x, repeats, dim=None: torch.empty_like(x),
)
def repeat_interleave_backward_tensor(grad, x, repeats, dim=None):
    """d self of torch.repeat_interleave(self, repeats, dim) with per-element repeats."""
    return _segment_sums(grad, x, dim, repeats.to(grad.device))


@npu_op(
    "npu_renorm_backward(Tensor grad, Tensor self, Scalar p, int dim, Scalar maxnorm) -> Tensor",
    fake=lambda grad, x, p, dim, maxnorm: torch.empty_like(x),
)
def npu_renorm_backward(grad, x, p, dim, maxnorm):
    """d self of torch.renorm."""
    return vjp(lambda t: torch.renorm(t, p, dim, maxnorm), [x], [0], [grad])[0]
