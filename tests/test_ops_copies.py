"""npu_stride_copy(.out), npu_view_copy, npu_dtype_cast_ and reverse against element-by-element references,
with fake shapes / compile through check_op and their argument checks."""

import itertools

import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu


def stride_reference(x, shape, stride, offset):
    flat = x.flatten()
    out = torch.empty(shape, dtype=x.dtype)
    for index in itertools.product(*(range(n) for n in shape)):
        out[index] = flat[int(offset) + sum(i * s for i, s in zip(index, stride))]
    return out


def test_stride_copy_and_its_out_form():
    x = torch.randn(40)
    for shape, stride, offset in (([2, 3], [1, 4], 1), ([3, 2, 2], [10, 1, 5], 3), ([4], [0], 7)):
        window = dict(shape=shape, stride=stride, storage_offset=offset)
        check_op(lambda t, w=window: torch_npu.npu_stride_copy(t, **w), (x,),
                 lambda t, w=window: stride_reference(t, w["shape"], w["stride"], w["storage_offset"]), atol=0, rtol=0)  # fmt: skip
    out = torch.empty(1).npu()
    result = torch_npu.npu_stride_copy(x.npu(), [5, 2], [2, 1], 4, out=out)
    assert result is out and torch.equal(out.cpu(), stride_reference(x, [5, 2], [2, 1], 4))
    raises_operator_error(
        lambda: torch_npu.npu_stride_copy(x.npu(), [5, 10], [10, 1], 0),
        "npu_stride_copy: the window (shape [5, 10], stride [10, 1], offset 0) exceeds self's storage of 40 elements",
    )


def test_view_copy_writes_through_the_view():
    base = torch.zeros(3, 4).npu()
    other = torch.arange(3.0)
    result = torch_npu.npu_view_copy(base[:, 2], other.npu(), False)
    want = torch.zeros(3, 4)
    want[:, 2] = other
    assert torch.equal(base.cpu(), want) and result.data_ptr() == base[:, 2].data_ptr()


def test_dtype_cast_in_place():
    target = torch.zeros(2, 3, dtype=torch.bfloat16).npu()
    src = torch.tensor([1.0, 2.5, 3.1])
    result = torch_npu.npu_dtype_cast_(target, src.npu())
    assert result is target and torch.equal(target.cpu(), src.to(torch.bfloat16).expand(2, 3))


def test_reverse():
    x = torch.arange(24).view(2, 3, 4)

    def reference(t, axes):
        out = torch.empty_like(t)
        for i, j, k in itertools.product(*(range(n) for n in t.shape)):
            index = [i, j, k]
            for a in axes:
                index[a % 3] = t.shape[a % 3] - 1 - index[a % 3]
            out[i, j, k] = t[tuple(index)]
        return out

    for axes in ([0], [1, 2], [-1, 0]):
        check_op(lambda t, a=axes: torch_npu.reverse(t, a), (x,), lambda t, a=axes: reference(t, a), atol=0, rtol=0)
    raises_operator_error(lambda: torch_npu.reverse(x.npu(), [3]), "reverse: axis 3 is out of range for a 3-D tensor")


def test_trans_contiguous_out_overloads_fill_out():
    x = torch.arange(60.0).reshape(3, 4, 5)
    out = torch.empty(0).npu()
    got = torch_npu.npu_transpose_trans_contiguous(x.npu(), [2, 0, 1], out=out)
    assert got.data_ptr() == out.data_ptr() and got.is_contiguous()
    assert torch.equal(out.cpu(), x.permute(2, 0, 1))
    got = torch_npu.npu_indexing_trans_contiguous(x.npu(), [0, 1, -4], [3, 4, 5], [2, 2, 3], out=out)
    assert torch.equal(got.cpu(), x[0:3:2, 1:4:2, 1:5:3])
    raises_operator_error(
        lambda: torch_npu.npu_transpose_trans_contiguous(x.npu(), [0, 0, 1], out=out),
        "npu_transpose_trans_contiguous: perm must be a permutation of the 3 dims, got [0, 0, 1]",
    )
