"""Layout and tensor operators: npu_one_hot, npu_pad, npu_confusion_transpose, npu_transpose,
npu_scatter_nd_update(_), npu_dtype_cast, npu_linear, npu_bmmV2."""

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check, dtype_of
from torch_npu.ops.bit_masks import pack_bits, unpack_bits
from torch_npu.ops.dtype_support import FLOATS, HALF_AND_FLOAT, INDEX_TYPES
from torch_npu.ops.functionalization import functionalized_by
from torch_npu.ops.registration import npu_op

__all__ = []


@npu_op(
    "npu_one_hot(Tensor self, int num_classes=-1, int depth=1, Scalar on_value=1, Scalar off_value=0) -> Tensor",
    dtypes={"self": (torch.uint8, torch.int32, torch.int64)},
    api="aclnnOneHot",
)
def npu_one_hot(x, num_classes=-1, depth=1, on_value=1, off_value=0):
    """One-hot of the integer tensor along a new last dim of size `depth` (num_classes, when given, must
    equal depth): on_value where the index matches, off_value elsewhere, as float32. Indices outside
    [0, depth) give a row of off_value."""
    check(not x.is_floating_point(), "npu_one_hot", f"self must hold integer indices, got {x.dtype}")
    check(depth >= 1, "npu_one_hot", f"depth must be >= 1, got {depth}")
    check(num_classes in (-1, depth), "npu_one_hot", f"num_classes={num_classes} must be -1 or equal depth={depth}")
    classes = torch.arange(depth, device=x.device)
    hit = x.long().unsqueeze(-1) == classes
    on = torch.full((), float(on_value), device=x.device)
    off = torch.full((), float(off_value), device=x.device)
    return torch.where(hit, on, off)


@npu_op("npu_pad(Tensor input, int[] paddings) -> Tensor")
def npu_pad(x, paddings):
    """Zero padding given per dim from the first: [before_0, after_0, before_1, after_1, ...]."""
    check(
        len(paddings) == 2 * x.dim(), "npu_pad", f"paddings needs 2 values per dim ({2 * x.dim()}), got {len(paddings)}"
    )
    pad = []
    for d in reversed(range(x.dim())):
        pad += [paddings[2 * d], paddings[2 * d + 1]]
    return F.pad(x, pad)


@npu_op(
    "npu_confusion_transpose(Tensor self, int[] perm, int[] shape, bool transpose_first) -> Tensor", differentiable=True
)
def npu_confusion_transpose(x, perm, shape, transpose_first):
    """transpose_first: x.permute(perm).reshape(shape); otherwise x.reshape(shape).permute(perm) (contiguous)."""
    if transpose_first:
        return x.permute(perm).contiguous().view(shape)
    check(
        len(perm) == len(shape), "npu_confusion_transpose", f"perm {list(perm)} and shape {list(shape)} differ in rank"
    )
    return x.reshape(shape).permute(perm).contiguous()


@npu_op("npu_transpose(Tensor self, int[] perm, bool require_contiguous=True) -> Tensor")
def npu_transpose(x, perm, require_contiguous=True):
    check(
        sorted(perm) == list(range(x.dim())),
        "npu_transpose",
        f"perm {list(perm)} is not a permutation of {x.dim()} dims",
    )
    return x.permute(perm).contiguous()


def _scatter_nd(x, indices, updates):
    check(
        indices.shape[-1] <= x.dim(),
        "npu_scatter_nd_update",
        f"indices' last dim ({indices.shape[-1]}) exceeds self's rank ({x.dim()})",
    )
    check(
        updates.shape == indices.shape[:-1] + x.shape[indices.shape[-1] :],
        "npu_scatter_nd_update",
        f"updates {tuple(updates.shape)} must be indices.shape[:-1] + self.shape[K:] = "
        f"{tuple(indices.shape[:-1] + x.shape[indices.shape[-1]:])}",
    )
    return tuple(indices.long().unbind(-1))


@npu_op(
    "npu_scatter_nd_update(Tensor self, Tensor indices, Tensor updates) -> Tensor",
    dtypes={"indices": INDEX_TYPES},
    api="aclnnScatterNdUpdate",
)
def npu_scatter_nd_update(x, indices, updates):
    """A copy of self with self[indices[..., 0], ..., indices[..., K-1]] = updates (TensorFlow's scatter_nd_update)."""
    out = x.clone()
    out[_scatter_nd(x, indices, updates)] = updates.to(x.dtype)
    return out


def _scatter_nd_inplace(x, indices, updates):
    x[_scatter_nd(x, indices, updates)] = updates.to(x.dtype)
    return x


npu_op(
    "npu_scatter_nd_update_(Tensor(a!) self, Tensor indices, Tensor updates) -> Tensor(a!)",
    fake=lambda x, indices, updates: x,
)(_scatter_nd_inplace)


functionalized_by("npu_scatter_nd_update_", "npu_scatter_nd_update")


@npu_op("npu_change_data_ptr(Tensor dst, Tensor src, int index) -> int", fake=lambda dst, src, index: 0)
def npu_change_data_ptr(dst, src, index):
    """Point dst's storage at src's memory from element `index` on (dst's own block is freed); returns 0.
    src's storage must outlive dst, as with torch_npu."""
    from torch_npu import _C

    return _C._change_data_ptr(dst, src, index)


def _cast_back(ctx, grad):
    """The gradient cast back to the input's dtype by npu_dtype_cast itself, as torch_npu's backward does: under
    create_graph it marks the incoming gradient as requiring grad first, so the gradient has a grad_fn (another
    NpuDtypeCastBackward) even when the cotangent did not require grad."""
    if torch.is_grad_enabled() and not grad.requires_grad:
        grad = grad.detach().requires_grad_()
    return torch.ops.npu.npu_dtype_cast(grad, ctx.source), None, None


@npu_op(
    "npu_dtype_cast(Tensor self, int dtype, int? input_dtype=None) -> Tensor",
    backward=_cast_back,
    setup_context=lambda ctx, inputs, output: setattr(ctx, "source", inputs[0].dtype),
)
def npu_dtype_cast(x, dtype, input_dtype=None):
    """x.to(dtype) (dtype is a torch.dtype or its ScalarType number)."""
    return x.to(dtype_of(dtype, "npu_dtype_cast"))


@npu_op(
    "npu_linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
    differentiable=True,
    dtypes={"input": FLOATS, "weight": FLOATS, "bias": FLOATS},
    api="aclnnMatmul",
)
def npu_linear(x, weight, bias=None):
    """F.linear: x @ weight^T + bias (weight [out, in])."""
    check(
        x.shape[-1] == weight.shape[-1],
        "npu_linear",
        f"input's last dim ({x.shape[-1]}) must equal weight's in_features ({weight.shape[-1]})",
    )
    return F.linear(x, weight, bias)


@npu_op(
    "npu_bmmV2(Tensor self, Tensor mat2, int[] output_sizes) -> Tensor",
    differentiable=True,
    dtypes={"self": FLOATS, "mat2": FLOATS},
    api="aclnnBatchMatMul",
)
def npu_bmmV2(x, mat2, output_sizes):
    """Batched matrix product torch.matmul(self, mat2) (output_sizes is a layout hint on the NPU)."""
    check(
        x.shape[-1] == mat2.shape[-2], "npu_bmmV2", f"self {tuple(x.shape)} and mat2 {tuple(mat2.shape)} do not chain"
    )
    return torch.matmul(x, mat2)


@npu_op("npu_sign_bits_pack(Tensor self, int size) -> Tensor", dtypes={"self": HALF_AND_FLOAT}, api="SignBitsPack")
def npu_sign_bits_pack(x, size):
    """1-bit compression of a 1-D tensor: bit i is 1 where x[i] >= 0, eight per byte with the first element in
    the lowest bit, zero-padded to whole bytes; a uint8 tensor of `size` rows."""
    check(x.dim() == 1, "npu_sign_bits_pack", f"self must be 1-D, got {x.dim()}-D")
    packed = pack_bits(x >= 0)
    check(
        packed.numel() % size == 0,
        "npu_sign_bits_pack",
        f"{packed.numel()} packed bytes do not split into size={size} rows",
    )
    return packed.view(size, -1)


@npu_op(
    "npu_sign_bits_unpack(Tensor input, int size, ScalarType dtype) -> Tensor",
    dtypes={"input": (torch.uint8,)},
    api="SignBitsUnpack",
)
def npu_sign_bits_unpack(packed, size, dtype):
    """The inverse of npu_sign_bits_pack: each bit of the uint8 input as +1 (set) or -1, first element from the
    lowest bit, as `dtype` (float16 or float32) in `size` rows."""
    check(
        dtype in (torch.float16, torch.float32),
        "npu_sign_bits_unpack",
        f"dtype must be float16 or float32, got {dtype}",
    )
    check(packed.dim() == 1, "npu_sign_bits_unpack", f"input must be 1-D, got {packed.dim()}-D")
    values = unpack_bits(packed).to(dtype) * 2 - 1
    check(
        values.numel() % size == 0,
        "npu_sign_bits_unpack",
        f"{values.numel()} values do not split into size={size} rows",
    )
    return values.view(size, -1)


@npu_op("npu_reshape(Tensor self, int[] shape, bool can_refresh=False) -> Tensor")
def npu_reshape(x, shape, can_refresh=False):
    """x with a new shape (a new tensor; can_refresh, which lets the card reuse x's memory, changes nothing here)."""
    check(
        x.numel() == _numel(shape), "npu_reshape", f"shape {list(shape)} does not hold the {x.numel()} elements of self"
    )
    return x.reshape(shape).clone(memory_format=torch.contiguous_format)


def _numel(shape):
    total = 1
    for d in shape:
        total *= d
    return total


@npu_op("one_(Tensor(a!) self) -> Tensor(a!)")
def one_(x):
    """Fills self with ones in place."""
    return x.fill_(1)


@npu_op("npu_scatter(Tensor self, Tensor indices, Tensor updates, int dim) -> Tensor")
def npu_scatter(x, indices, updates, dim):
    """torch.scatter with one index per slice: out[..., indices[j], ...] (position j of the other dimension)
    takes updates[j] along `dim`; indices and updates have self's shape without `dim`."""
    op = "npu_scatter"
    check(-x.dim() <= dim < x.dim(), op, f"dim={dim} is out of range for a {x.dim()}-D self")
    dim %= x.dim()
    expected = tuple(x.shape[:dim] + x.shape[dim + 1 :])
    check(
        tuple(indices.shape) == expected and tuple(updates.shape) == expected,
        op,
        f"indices and updates must have the shape {expected} (self without dim {dim}), got {tuple(indices.shape)} and {tuple(updates.shape)}",
    )
    return x.clone().scatter_(dim, indices.long().unsqueeze(dim), updates.to(x.dtype).unsqueeze(dim))


def _scatter_update_axis(data, indices, updates, axis, op):
    """Checks what can be checked without reading indices (fake kernels too); the axis, non-negative."""
    check(
        2 <= data.dim() <= 8 and updates.dim() == data.dim(),
        op,
        f"data and updates must have the same rank, 2 to 8, got {data.dim()} and {updates.dim()}",
    )
    check(
        indices.dim() == 1 and indices.shape[0] == data.shape[0],
        op,
        f"indices must be [batch] with batch={data.shape[0]} (2-D indices are not supported on vnpu), got {tuple(indices.shape)}",
    )
    check(
        -data.dim() < axis < data.dim() and axis % data.dim() != 0,
        op,
        f"axis={axis} must name a dimension after the batch dimension",
    )
    return axis % data.dim()


def _scatter_update(data, indices, updates, axis, op):
    axis = _scatter_update_axis(data, indices, updates, axis, op)
    length = updates.shape[axis]
    for b, start in enumerate(indices.tolist()):
        check(
            0 <= start and start + length <= data.shape[axis],
            op,
            f"indices[{b}]={start} + {length} updates exceed axis {axis} of size {data.shape[axis]}",
        )
        data[b].narrow(axis - 1, start, length).copy_(updates[b])
    return data


def _scatter_update_fake(data, indices, updates, axis):
    _scatter_update_axis(data, indices, updates, axis, "scatter_update")
    return torch.empty_like(data)


def _scatter_update_inplace_fake(data, indices, updates, axis):
    _scatter_update_axis(data, indices, updates, axis, "scatter_update_")
    return data


@npu_op("scatter_update(Tensor self, Tensor indices, Tensor updates, int axis) -> Tensor", fake=_scatter_update_fake)
def scatter_update(data, indices, updates, axis):
    """A copy of data where, for each batch b, the slice starting at indices[b] along `axis` is replaced by
    updates[b] (as long as updates' size on that axis)."""
    return _scatter_update(data.clone(), indices, updates, axis, "scatter_update")


@npu_op(
    "scatter_update_(Tensor(a!) self, Tensor indices, Tensor updates, int axis) -> Tensor(a!)",
    fake=_scatter_update_inplace_fake,
)
def scatter_update_(data, indices, updates, axis):
    """scatter_update in place."""
    return _scatter_update(data, indices, updates, axis, "scatter_update_")


functionalized_by("scatter_update_", "scatter_update")


def _check_prefetch_sizes(x, dependency, max_size, offset=0):
    """torch_npu's own checks of npu_prefetch (its meta function raises them, word for word)."""
    torch._check(max_size > 0, lambda: f"The max_size should be greater than zero, but got {max_size}.")
    torch._check(offset >= 0, lambda: f"The offset should be nonnegative, but got {offset}.")


@npu_op("npu_prefetch(Tensor self, Tensor? dependency, int max_size, int offset=0) -> ()", fake=_check_prefetch_sizes)
def npu_prefetch(x, dependency, max_size, offset=0):
    """On a card: start copying up to max_size bytes of self (from byte offset) into the L2 cache once
    `dependency` is computed, to hide the weight load of a later operator. Caching has no result to compute,
    so on vnpu it only checks its arguments."""
    op = "npu_prefetch"
    _check_prefetch_sizes(x, dependency, max_size, offset)
    check(
        0 <= offset < max(x.numel() * x.element_size(), 1),
        op,
        f"offset={offset} must be inside self's {x.numel() * x.element_size()} bytes",
    )


def _range_mask(length, start, end):
    """[len(start), length] bool: row j is set on [start[j], end[j])."""
    steps = torch.arange(length, device=start.device)
    return (steps >= start.long().unsqueeze(-1)) & (steps < end.long().unsqueeze(-1))


@npu_op(
    "npu_masked_fill_range(Tensor self, Tensor start, Tensor end, Tensor value, int axis=-1) -> Tensor",
    dtypes={"self": (torch.float16, torch.float32, torch.int32, torch.int8), "start": (torch.int32,)},
    api="MaskedFillRange",
)
def npu_masked_fill_range(x, start, end, value, axis=-1):
    """Fills ranges along `axis` with value[i]: for each (i, j), positions start[i, j] <= k < end[i, j] of
    x's axis get value[i] — in row j of the leading dim when axis is the last dim of a 2-D/3-D x, across
    the whole slice otherwise. Later (i, j) overwrite earlier ones. start/end are [num, N], value [num]."""
    op = "npu_masked_fill_range"
    check(1 <= x.dim() <= 3, op, f"self must be 1-D, 2-D or 3-D, got {x.dim()}-D")
    check(start.shape == end.shape and start.dim() == 2, op, "start and end must be [num, N] of the same shape")
    check(value.numel() == start.shape[0], op, f"value must hold num={start.shape[0]} values, got {value.numel()}")
    axis = axis % x.dim()
    per_row = x.dim() > 1 and axis == x.dim() - 1  # row j of dim 0 gets its own range
    check(not per_row or start.shape[1] <= x.shape[0], op, f"N={start.shape[1]} exceeds self's dim 0 ({x.shape[0]})")
    out = x.clone()
    for i in range(start.shape[0]):
        ranges = _range_mask(x.shape[axis], start[i], end[i])  # [N, axis length]
        if per_row:
            mask = torch.zeros(x.shape[0], x.shape[axis], dtype=torch.bool, device=x.device)
            mask[: start.shape[1]] = ranges
            mask = mask.view(x.shape[0], *([1] * (x.dim() - 2)), x.shape[axis])
        else:
            shape = [1] * x.dim()
            shape[axis] = x.shape[axis]
            mask = ranges.any(0).view(shape)
        out = torch.where(mask, value[i].to(x.dtype), out)
    return out


@npu_op("npu_stride_add(Tensor self, Tensor other, Scalar offset1, Scalar offset2, Scalar c1_len) -> Tensor")
def npu_stride_add(x1, x2, offset1, offset2, c1_len):
    """Adds x1[:, offset1:] and x2[:, offset2:] along dim 1 (the C1 axis of a 5HD tensor), each zero-padded to
    16 * c1_len channels: [N, 16 * c1_len, ...]."""
    op = "npu_stride_add"
    check(x1.dim() == x2.dim() == 5, op, f"self and other must be 5-D (5HD), got {x1.dim()}-D and {x2.dim()}-D")
    channels = 16 * int(c1_len)
    parts = []
    for name, x, offset in (("self", x1, int(offset1)), ("other", x2, int(offset2))):
        check(0 <= offset <= x.shape[1], op, f"offset for {name} must be in [0, {x.shape[1]}], got {offset}")
        part = x[:, offset:]
        check(
            part.shape[1] <= channels,
            op,
            f"{name}[:, {offset}:] has {part.shape[1]} channels, more than 16 * c1_len = {channels}",
        )
        parts.append(torch.nn.functional.pad(part, (0, 0, 0, 0, 0, 0, 0, channels - part.shape[1])))
    return torch.add(*parts)


@npu_op("copy_memory_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)")
def copy_memory_(dst, src, non_blocking=False):
    """Copies src's elements into self (an npu-to-npu memory copy): both npu tensors of one dtype, on one
    device, with the same number of elements; returns self."""
    op = "copy_memory_"
    check(
        dst.device.type == src.device.type == "npu",
        op,
        f"copy_memory_ only supports npu tensors, got {dst.device} and {src.device}",
    )
    check(dst.dtype == src.dtype, op, f"self and src must have one dtype, got {dst.dtype} and {src.dtype}")
    check(dst.device == src.device, op, f"self and src must be on one device, got {dst.device} and {src.device}")
    check(dst.numel() == src.numel(), op, f"self has {dst.numel()} elements, src has {src.numel()}")
    return dst.copy_(src.reshape(dst.shape), non_blocking=non_blocking)
