"""Reductions, sorting, slicing and broadcasting: npu_max, npu_min, npu_sort_v2, npu_slice,
npu_broadcast, npu_indexing (a strided slice with TensorFlow's begin/end/shrink masks), npu_gather_sparse_index."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import _export, npu_op

__all__ = []


def _wrap(dim, rank, op):
    check(-max(rank, 1) <= dim < max(rank, 1), op, f"dim={dim} is out of range for a {rank}-D input")
    return dim % max(rank, 1)


@npu_op("npu_max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", differentiable=True)
def npu_max(x, dim, keepdim=False):
    """torch.max along `dim`; the card's ArgMaxWithValue returns int32 indices."""
    values, indices = torch.max(x, _wrap(dim, x.dim(), "npu_max"), keepdim)
    return values, indices.to(torch.int32)


@npu_op("npu_min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", differentiable=True)
def npu_min(x, dim, keepdim=False):
    """torch.min along `dim`, with int32 indices."""
    values, indices = torch.min(x, _wrap(dim, x.dim(), "npu_min"), keepdim)
    return values, indices.to(torch.int32)


_export("npu_max")
_export("npu_min")


@npu_op("npu_sort_v2(Tensor self, int dim=-1, bool descending=False) -> Tensor", differentiable=True)
def npu_sort_v2(x, dim=-1, descending=False):
    """The sorted values only (torch.sort without the indices)."""
    return torch.sort(x, dim=_wrap(dim, x.dim(), "npu_sort_v2"), descending=descending).values


@npu_op("npu_slice(Tensor self, int[] offsets, int[] size) -> Tensor", differentiable=True)
def npu_slice(x, offsets, size):
    """A new tensor holding x[offsets[d] : offsets[d] + size[d]] in every dimension d."""
    check(
        len(offsets) == x.dim() and len(size) == x.dim(),
        "npu_slice",
        f"offsets and size need {x.dim()} entries each, got {len(offsets)} and {len(size)}",
    )
    out = x
    for d, (start, length) in enumerate(zip(offsets, size)):
        check(
            0 <= start and length >= 0 and start + length <= x.shape[d],
            "npu_slice",
            f"offset {start} + size {length} exceeds dim {d} of size {x.shape[d]}",
        )
        out = out.narrow(d, start, length)
    return out.clone(memory_format=torch.contiguous_format)


@npu_op("npu_broadcast(Tensor self, int[] size) -> Tensor", differentiable=True)
def npu_broadcast(x, size):
    """x broadcast to `size`, as a new contiguous tensor."""
    return x.expand(size).clone(memory_format=torch.contiguous_format)


@npu_op(
    "npu_indexing(Tensor self, int[] begin, int[] end, int[] strides, int begin_mask=0, int end_mask=0, "
    "int ellipsis_mask=0, int new_axis_mask=0, int shrink_axis_mask=0) -> Tensor",
    differentiable=True,
)
def npu_indexing(
    x, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0
):
    """StridedSlice: per dimension d, x[begin[d] : end[d] : strides[d]] (bit d of begin_mask / end_mask
    takes the whole start / end, bit d of shrink_axis_mask keeps only index begin[d] and drops the
    dimension). Negative begin / end count from the end. ellipsis_mask and new_axis_mask are refused."""
    op = "npu_indexing"
    check(
        len(begin) == len(end) == len(strides),
        op,
        f"begin, end and strides need the same length, got {len(begin)}, {len(end)} and {len(strides)}",
    )
    check(len(begin) <= x.dim(), op, f"{len(begin)} slice entries for a {x.dim()}-D input")
    check(
        ellipsis_mask == 0 and new_axis_mask == 0,
        op,
        "ellipsis_mask and new_axis_mask are not supported on vnpu; index with Python's ... and None instead",
    )
    out, dropped = x, []
    for d, (b, e, s) in enumerate(zip(begin, end, strides)):
        check(s > 0, op, f"strides[{d}] must be positive, got {s}")
        n = x.shape[d]
        if shrink_axis_mask >> d & 1:
            index = b + n if b < 0 else b
            check(0 <= index < n, op, f"begin[{d}]={b} is out of range for dim {d} of size {n}")
            out = out.narrow(d, index, 1)
            dropped.append(d)
            continue
        start = 0 if begin_mask >> d & 1 else min(max(b + n if b < 0 else b, 0), n)
        stop = n if end_mask >> d & 1 else min(max(e + n if e < 0 else e, 0), n)
        out = out.narrow(d, start, max(stop - start, 0))[(slice(None),) * d + (slice(None, None, s),)]
    for d in reversed(dropped):
        out = out.squeeze(d)
    return out.clone(memory_format=torch.contiguous_format)


@npu_op(
    "npu_gather_sparse_index(Tensor input, Tensor index) -> Tensor",
    differentiable=True,
    dtypes={"index": (torch.int32, torch.int64)},
    api="aclnnGatherSparseIndex",
)
def npu_gather_sparse_index(table, index):
    """Rows of a 2-D table picked by index (an embedding lookup): out [*index.shape, table.shape[1]]; the
    gradient adds each output row back into its table row."""
    op = "npu_gather_sparse_index"
    check(table.dim() == 2, op, f"input must be 2-D [num_embeddings, embedding_dim], got {table.dim()}-D")
    return table.index_select(0, index.reshape(-1).long()).view(*index.shape, table.shape[1])


@npu_op(
    "npu_indexing_trans_contiguous.out(Tensor self, int[] begin, int[] end, int[] strides, int begin_mask=0, "
    "int end_mask=0, int ellipsis_mask=0, int new_axis_mask=0, int shrink_axis_mask=0, *, Tensor(a!) out) "
    "-> Tensor(a!)",
    fake=lambda x, begin, end, strides, *args, out, **kwargs: out,
)
def npu_indexing_trans_contiguous_out(x, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0,
                                      new_axis_mask=0, shrink_axis_mask=0, *, out):  # fmt: skip
    """npu_indexing's strided slice copied contiguous into out (resized to it); out returned."""
    sliced = npu_indexing(x, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
    out.resize_(sliced.shape)
    return out.copy_(sliced)
