"""The indexing backward operators torch_npu exposes by name: npu_max_backward / npu_min_backward (the gradient
back at the picked indices), npu_gather_backward, npu_gather_sparse_index_backward, repeat_interleave_backward_int /
_tensor (segment sums) and npu_renorm_backward."""

import torch

from torch_npu.ops._common import check
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
    rows = grad.reshape(-1, *self_sizes[1:])
    return grad.new_zeros(self_sizes).index_add(0, index.reshape(-1).long(), rows)


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
