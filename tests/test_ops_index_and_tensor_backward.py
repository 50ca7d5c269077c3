"""The named indexing backward operators and the tensor-operator backwards against autograd of torch's own
operators on the CPU."""

import pytest
import torch
import torch.nn.functional as F
from op_check import check_op

import torch_npu

torch.manual_seed(0)


def autograd_of(forward, inputs, cotangent, wanted=(0,)):
    leaves = [x.detach().clone().requires_grad_(i in wanted) for i, x in enumerate(inputs)]
    found = torch.autograd.grad(forward(*leaves), [leaves[i] for i in wanted], cotangent)
    return found[0] if len(wanted) == 1 else found


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize(("name", "reduce"), [("npu_max_backward", torch.max), ("npu_min_backward", torch.min)])
def test_max_min_backward(name, reduce, keepdim):
    x = torch.randn(4, 5, 3)
    values, indices = reduce(x, 1, keepdim=keepdim)
    dy = torch.randn(values.shape)
    check_op(
        lambda dy, indices: getattr(torch_npu, name)(dy, 1, indices, [4, 5, 3], keepdim),
        (dy, indices),
        lambda dy, indices: autograd_of(lambda t: reduce(t, 1, keepdim=keepdim)[0], [x], dy),
    )


def test_gather_backward_accumulates_repeated_indices():
    x = torch.randn(3, 4)
    index = torch.tensor([[0, 0, 3], [1, 1, 1], [2, 3, 2]])
    dy = torch.randn(3, 3)
    check_op(
        lambda dy, index: torch_npu.npu_gather_backward(dy, [3, 4], 1, index, False),
        (dy, index),
        lambda dy, index: autograd_of(lambda t: torch.gather(t, 1, index), [x], dy),
    )
    with pytest.raises(RuntimeError, match="sparse_grad=True is not supported"):
        torch_npu.npu_gather_backward(dy.npu(), [3, 4], 1, index.npu(), True)


def test_gather_sparse_index_backward():
    table, index = torch.randn(6, 4), torch.tensor([[0, 5, 5], [2, 0, 1]], dtype=torch.int32)
    dy = torch.randn(2, 3, 4)
    check_op(
        lambda dy, index: torch_npu.npu_gather_sparse_index_backward(dy, [6, 4], index),
        (dy, index),
        lambda dy, index: autograd_of(lambda t: F.embedding(index.long(), t), [table], dy),
    )


def test_npu_index_add_adds_rows_at_a_flattened_index_in_place_or_out_of_place():
    x, index, source = torch.randn(5, 3), torch.tensor([[4, 0], [4, 2]]), torch.randn(2, 2, 3)
    want = x.index_add(0, index.flatten(), source.reshape(4, 3), alpha=-2)  # (row 4 twice: the rows add up)
    npu_x = x.npu()
    out = torch_npu._npu_index_add(npu_x, index.npu(), source.npu(), alpha=-2)
    assert torch.equal(out.cpu(), want) and torch.equal(npu_x.cpu(), x)
    assert torch_npu._npu_index_add_(npu_x, index.npu(), source.npu(), alpha=-2) is npu_x
    assert torch.equal(npu_x.cpu(), want)
    with pytest.raises(RuntimeError) as info:
        torch_npu._npu_index_add(npu_x, index.npu(), torch.randn(3, 3).npu())
    assert str(info.value).splitlines()[0] == "_npu_index_add: source holds 3 rows of self's shape, index 4"
    compiled = torch.compile(lambda t, i, s: torch_npu._npu_index_add_(t.clone(), i, s), backend="aot_eager", fullgraph=True)  # fmt: skip
    assert torch.equal(compiled(x.npu(), index.npu(), source.npu()).cpu(), x.index_add(0, index.flatten(), source.reshape(4, 3)))  # fmt: skip


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_repeat_interleave_backward(dim):
    x = torch.randn(3, 4)
    dy = torch.randn(torch.repeat_interleave(x, 3, dim).shape)
    check_op(
        lambda dy, x: torch_npu.repeat_interleave_backward_int(dy, x, 3, dim),
        (dy, x),
        lambda dy, x: autograd_of(lambda t: torch.repeat_interleave(t, 3, dim), [x], dy),
    )
    counts = torch.tensor([2, 0, 1]) if dim == 0 else torch.tensor([1, 3, 0, 2] if dim == 1 else [1] * 6 + [2] * 6)
    dy = torch.randn(torch.repeat_interleave(x, counts, dim).shape)
    check_op(
        lambda dy, x, counts: torch_npu.repeat_interleave_backward_tensor(dy, x, counts, dim),
        (dy, x, counts),
        lambda dy, x, counts: autograd_of(lambda t: torch.repeat_interleave(t, counts, dim), [x], dy),
    )


def test_renorm_backward():
    x, dy = torch.randn(4, 6) * 3, torch.randn(4, 6)
    check_op(
        lambda dy, x: torch_npu.npu_renorm_backward(dy, x, 2, 0, 1.5),
        (dy, x),
        lambda dy, x: autograd_of(lambda t: torch.renorm(t, 2, 0, 1.5), [x], dy),
    )


@pytest.mark.parametrize("transpose_first", [False, True])
def test_confusion_transpose_backward_inverts_the_forward_as_torch_npu_calls_it(transpose_first):
    perm = [0, 2, 1, 3]
    x = torch.randn(2, 3, 4, 5) if transpose_first else torch.randn(2, 12, 5)
    shape = [2, 4, 15] if transpose_first else [2, 3, 4, 5]
    leaf = x.npu().requires_grad_(True)
    y = torch_npu.npu_confusion_transpose(leaf, perm, shape, transpose_first)
    dy = torch.randn(y.shape, device="npu")
    (want,) = torch.autograd.grad(y, leaf, dy)
    got = torch_npu.npu_confusion_transpose_backward(dy, perm, list(x.shape), not transpose_first)
    torch.testing.assert_close(got.cpu(), want.cpu(), rtol=0, atol=0)
    reference = dy.cpu().reshape(2, 4, 3, 5) if transpose_first else dy.cpu()
    expected = reference.permute(0, 2, 1, 3).reshape(x.shape)
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)


def test_dtype_cast_linear_and_bmm_v2_backward():
    dy = torch.randn(3, 4, dtype=torch.float16)
    got = torch_npu.npu_dtype_cast_backward(dy.npu(), torch.float32)
    assert got.dtype == torch.float32 and torch.equal(got.cpu(), dy.float())

    x, w, dy = torch.randn(2, 3, 5), torch.randn(4, 5), torch.randn(2, 3, 4)
    check_op(
        torch_npu.npu_linear_backward,
        (dy, x, w),
        lambda dy, x, w: autograd_of(lambda a, b: F.linear(a, b), [x, w], dy, (0, 1)),
    )
    a, b, dy = torch.randn(2, 3, 4), torch.randn(4, 5), torch.randn(2, 3, 5)
    check_op(
        lambda dy, a, b: torch_npu.npu_bmm_v2_mat1_backward(dy, a, b, [2, 3, 4]),
        (dy, a, b),
        lambda dy, a, b: autograd_of(torch.matmul, [a, b], dy, (0,)),
    )
    check_op(
        lambda dy, a, b: torch_npu.npu_bmm_v2_mat2_backward(dy, a, b, [4, 5]),
        (dy, a, b),
        lambda dy, a, b: autograd_of(torch.matmul, [a, b], dy, (1,)),
    )
