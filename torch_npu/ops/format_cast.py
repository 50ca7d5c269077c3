"""Private formats: npu_format_cast(_), get_npu_format, empty_with_format, get_storage_size.

A tensor's format lives with its storage (the caching allocator's block). A cast allocates the
physical size the format needs on the NPU (see storage_shapes.py), so memory statistics and OOMs
match hardware, and keeps the logical shape, strides and values unchanged.
"""

import inspect

import torch

from torch_npu import _C
from torch_npu.npu._format import Format
from torch_npu.ops._library import define
from torch_npu.ops.registration import NpuOperatorPacket, exported_packet
from torch_npu.ops.storage_shapes import FIVE_D_FORMATS, NZ_FORMATS, default_format, storage_numel
from torch_npu.utils._error_code import ErrCode, ops_error
from torch_npu.utils._warnings import npu_warn

__all__ = ["npu_format_cast", "npu_format_cast_", "get_npu_format", "empty_with_format", "get_storage_size"]

_OPT = "*, int? customize_dtype=None, int? input_dtype=None"
define(f"npu_format_cast(Tensor self, int acl_format, {_OPT}) -> Tensor")
define(f"npu_format_cast.Tensor(Tensor self, Tensor dst, {_OPT}) -> Tensor")
define(f"npu_format_cast_(Tensor(a!) self, Tensor src, {_OPT}) -> Tensor(a!)")
define(f"npu_format_cast_.acl_format(Tensor(a!) self, int acl_format, {_OPT}) -> Tensor(a!)")
define("get_npu_format(Tensor self) -> int")
define(
    "empty_with_format(int[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None, int acl_format=2, int? base_addr_aligned_kb=None) -> Tensor"
)


# torch_npu's base formats (FormatHelper::IsBaseFormatType): their storage is the logical layout, so a cast
# between two of them only relabels the storage, whatever the tensor's rank, and returns the same memory.
_RELABELLED = frozenset({Format.ND, Format.NCHW, Format.NHWC, Format.NCDHW})


def _target_format(acl_format, tensor):
    try:
        fmt = Format(int(acl_format))
    except (ValueError, TypeError):
        known = ", ".join(f"{f.name}={int(f)}" for f in Format if f != Format.UNDEFINED)
        raise RuntimeError(
            f"npu_format_cast: {acl_format} is not an NPU format; torch_npu.Format has {known}"
            + ops_error(ErrCode.PARAM)
        ) from None
    if fmt == Format.UNDEFINED:
        raise RuntimeError("npu_format_cast: cannot cast to Format.UNDEFINED" + ops_error(ErrCode.PARAM))
    if _relabels(tensor, fmt):
        return fmt
    if fmt in NZ_FORMATS and len(_storage_descriptor(tensor)) < 2:
        npu_warn("Cannot create tensor with NZ format while dim < 2, tensor will be created with ND format.")
        return Format.ND
    if fmt in FIVE_D_FORMATS and tensor.dim() != 5:
        raise RuntimeError(
            f"npu_format_cast: format {fmt} needs a 5-D tensor, got {tensor.dim()}-D" + ops_error(ErrCode.PARAM)
        )
    if fmt not in NZ_FORMATS and fmt not in FIVE_D_FORMATS and fmt != Format.ND and tensor.dim() > 4:
        raise RuntimeError(
            f"npu_format_cast: format {fmt} needs at most 4 dimensions, got {tensor.dim()}" + ops_error(ErrCode.PARAM)
        )
    return fmt


def _storage_descriptor(tensor):
    """The sizes torch_npu's storage descriptor keeps: the base sizes recorded with the storage (with its private
    format, or the one dimension of bytes of a storage made on its own), else those of the tensor the storage was
    made for (a view's base), or the tensor's own."""
    recorded = _C._storage_base(tensor)
    if recorded is not None:
        return list(recorded[0])
    base = tensor._base if tensor._base is not None else tensor
    return list(base.shape)


def _check_npu(tensor, op):
    if tensor.device.type != "npu":
        raise RuntimeError(f"{op} expects an npu tensor, got one on {tensor.device}" + ops_error(ErrCode.PARAM))


def _allocate(shape, dtype, device, fmt):
    """An uninitialised contiguous tensor whose storage has the physical size of `fmt`."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    numel = 1
    for s in shape:
        numel *= s
    physical = max(storage_numel(shape, fmt, itemsize), numel)
    buffer = torch.empty(physical, dtype=dtype, device=device)
    out = torch.empty(0, dtype=dtype, device=device).set_(buffer.untyped_storage(), 0, shape)
    _C._set_storage_format(out, int(fmt), physical)
    return out


def get_npu_format(tensor):
    """The tensor's NPU format as an int (torch_npu.Format); the rank default when never cast."""
    _check_npu(tensor, "get_npu_format")
    fmt, _ = _C._storage_format(tensor)
    return int(default_format(tensor.dim()) if fmt < 0 else fmt)


def get_storage_size(tensor):
    """The number of elements of an npu tensor's storage in its format (torch_npu returns an int)."""
    _check_npu(tensor, "get_storage_size")
    return storage_numel(_physical_shape(tensor), get_npu_format(tensor), tensor.element_size())


def _physical_shape(tensor):
    """The shape the format lays out: the tensor's own, or its storage descriptor's when it is lower than 2-D."""
    return list(tensor.shape) if tensor.dim() >= 2 else _storage_descriptor(tensor)


def _relabels(tensor, fmt):
    """A cast of npu `tensor` to `fmt` is a relabelling: both formats are base formats, and they differ."""
    if fmt not in _RELABELLED or tensor.device.type != "npu":  # empty_with_format asks about a meta tensor
        return False
    current = get_npu_format(tensor)
    return fmt != current and current in _RELABELLED


def _relabel(tensor, fmt):
    """A cast between base formats: the storage keeps its memory, size and base and gets the new format."""
    _, numel = _C._storage_format(tensor)
    if numel < 0:
        numel = tensor.untyped_storage().nbytes() // tensor.element_size()
    base = _C._storage_base(tensor) or (_storage_descriptor(tensor), tensor.dtype)
    _C._set_storage_format(tensor, int(fmt), numel, *base)


def _cast(self, acl_format, customize_dtype=None, input_dtype=None):
    _check_npu(self, "npu_format_cast")
    fmt = _target_format(acl_format, self)
    if _relabels(self, fmt):
        _relabel(self, fmt)
    if fmt == get_npu_format(self):  # torch_npu: already in that format (or relabelled), the same storage
        return self.view(self.shape)
    physical = _physical_shape(self)
    out = _allocate(physical, self.dtype, self.device, fmt)
    if list(physical) != list(self.shape):
        out = out.view(-1)[: self.numel()].view(self.shape)
    out.copy_(self)
    return out


def _cast_like(self, dst, customize_dtype=None, input_dtype=None):
    return _cast(self, get_npu_format(dst))


def _cast_inplace(self, acl_format, customize_dtype=None, input_dtype=None):
    _check_npu(self, "npu_format_cast_")
    fmt = _target_format(acl_format, self)
    if _relabels(self, fmt):
        _relabel(self, fmt)
    if get_npu_format(self) == fmt:
        return self
    values = _cast(self, fmt)
    with torch.no_grad():
        self.set_(values.untyped_storage(), 0, self.shape)
    return self


def _cast_inplace_like(self, src, customize_dtype=None, input_dtype=None):
    return _cast_inplace(self, get_npu_format(src))


def _empty_with_format(
    size, dtype=None, layout=None, device=None, pin_memory=None, acl_format=2, base_addr_aligned_kb=None
):
    if layout not in (None, torch.strided):
        raise RuntimeError(f"empty_with_format supports torch.strided only, got {layout}" + ops_error(ErrCode.PARAM))
    device = torch.device("npu") if device is None else torch.device(device)
    if device.type != "npu":
        raise RuntimeError(f"empty_with_format makes npu tensors, got device {device}" + ops_error(ErrCode.PARAM))
    shape = list(size)
    fmt = _target_format(acl_format, torch.empty(shape, device="meta"))
    return _allocate(shape, dtype or torch.get_default_dtype(), device, fmt)


_KERNELS = {
    "npu_format_cast": _cast,
    "npu_format_cast.Tensor": _cast_like,
    "npu_format_cast_": _cast_inplace_like,
    "npu_format_cast_.acl_format": _cast_inplace,
    "get_npu_format": get_npu_format,
    "empty_with_format": _empty_with_format,
}
for _name, _kernel in _KERNELS.items():
    torch.library.impl("npu::" + _name, "CompositeExplicitAutograd")(_kernel)

torch.library.register_fake("npu::npu_format_cast")(lambda self, acl_format, **kw: torch.empty_like(self))
torch.library.register_fake("npu::npu_format_cast.Tensor")(lambda self, dst, **kw: torch.empty_like(self))


def _cast_backward(ctx, grad):
    return grad, None


torch.library.register_autograd(
    "npu::npu_format_cast", _cast_backward, setup_context=lambda ctx, inputs, output, **kwargs: None
)


class _FormatCastPacket(NpuOperatorPacket):
    """torch_npu.npu_format_cast(self, acl_format, customize_dtype=None): acl_format is an int, a torch_npu.Format or
    a tensor whose format to take; customize_dtype, the dtype the card lays the data out as (an int4 pair packed in
    int8 ...), is taken by position too, as torch_npu's function takes it."""

    def __call__(self, *args, **kwargs):
        if len(args) == 3:
            *args, kwargs["customize_dtype"] = args
        return super().__call__(*args, **kwargs)


npu_format_cast = exported_packet(torch.ops.npu.npu_format_cast, _FormatCastPacket)
npu_format_cast.__signature__ = inspect.signature(lambda self, acl_format, customize_dtype=None: None)

npu_format_cast_ = torch.ops.npu.npu_format_cast_
empty_with_format = exported_packet(torch.ops.npu.empty_with_format)  # device= also takes an index
