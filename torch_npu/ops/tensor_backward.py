"""The backward operators of torch_npu's tensor operators: npu_confusion_transpose_backward (torch_npu's
autograd calls it with the input's sizes and transpose_first flipped), npu_dtype_cast_backward,
npu_linear_backward, npu_bmm_v2_mat1_backward / npu_bmm_v2_mat2_backward and matmul_double_backward (the gradient of
matmul's backward)."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import vjp

__all__ = []

_NPU = torch.ops.npu


def _inverse(perm):
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return inverse


@npu_op(
    "npu_confusion_transpose_backward(Tensor grad, int[] perm, SymInt[] shape, bool transpose_first) -> Tensor",
    fake=lambda grad, perm, shape, transpose_first: grad.new_empty(shape),
)
def npu_confusion_transpose_backward(grad, perm, shape, transpose_first):
    """Undo npu_confusion_transpose into `shape` (the forward input's sizes): transpose_first permutes back then
    reshapes; otherwise reshapes to the permuted sizes then permutes back."""
    op = "npu_confusion_transpose_backward"
    check(sorted(perm) == list(range(len(perm))), op, f"perm must be a permutation, got {list(perm)}")
    check(len(perm) == len(shape) or transpose_first, op, f"perm {list(perm)} does not fit shape {list(shape)}")
    inverse = _inverse(perm)
    if transpose_first:
        return grad.permute(inverse).reshape(shape)
    return grad.reshape([shape[p] for p in perm]).permute(inverse).contiguous()


@npu_op(
    "npu_dtype_cast_backward(Tensor grad, ScalarType dtype, int? grad_dtype=None, int? input_dtype=None) -> Tensor",
    fake=lambda grad, dtype, grad_dtype=None, input_dtype=None: grad.new_empty(grad.shape, dtype=dtype),
)
def npu_dtype_cast_backward(grad, dtype, grad_dtype=None, input_dtype=None):
    """grad cast back to the forward input's dtype."""
    return grad.to(dtype)


@npu_op(
    "npu_linear_backward(Tensor grad, Tensor input, Tensor weight) -> (Tensor, Tensor)",
    fake=lambda grad, x, weight: (torch.empty_like(x), torch.empty_like(weight)),
)
def npu_linear_backward(grad, x, weight):
    """(d input, d weight) of npu_linear (input @ weight^T)."""
    return tuple(vjp(_NPU.npu_linear, [x, weight], [0, 1], [grad]))


def _bmm_v2(wanted):
    def kernel(grad, mat1, mat2, size):
        forward = lambda a, b: _NPU.npu_bmmV2(a, b, [])  # noqa: E731
        return vjp(forward, [mat1, mat2], [wanted], [grad])[0].reshape(size)

    kernel.__doc__ = f"d {('mat1', 'mat2')[wanted]} of npu_bmmV2 (mat1 @ mat2), in the sizes `size`."
    return kernel


for _wanted, _name in enumerate(("npu_bmm_v2_mat1_backward", "npu_bmm_v2_mat2_backward")):
    npu_op(
        f"{_name}(Tensor grad, Tensor mat1, Tensor mat2, SymInt[] size) -> Tensor",
        fake=lambda grad, mat1, mat2, size: grad.new_empty(size),
    )(_bmm_v2(_wanted))


def _matmul_backward(grad_out, x, other):
    """matmul's first backward (d self, d other), kept differentiable."""
    return torch.autograd.grad(torch.matmul(x, other), [x, other], grad_out, create_graph=True)


@npu_op(
    "matmul_double_backward(Tensor? grad_self, Tensor? grad_other, Tensor grad_out, Tensor self, Tensor other, "
    "bool[3] mask) -> (Tensor, Tensor, Tensor)",
    fake=lambda grad_self, grad_other, grad_out, x, other, mask: tuple(
        torch.empty_like(t) if keep else t.new_empty(0) for t, keep in zip((grad_out, x, other), mask)
    ),
)
def matmul_double_backward(grad_self, grad_other, grad_out, x, other, mask):
    """(d grad_out, d self, d other) of matmul's backward, given the gradients of its two outputs (a missing one
    contributes nothing); an output mask leaves out is an empty tensor."""
    grads = vjp(_matmul_backward, [grad_out, x, other], [0, 1, 2], [grad_self, grad_other])
    return tuple(g if keep else g.new_empty(0) for g, keep in zip(grads, mask))
