"""torch_npu.HiFloat8Tensor: a tensor whose values are stored as HiFloat8 codes (torch_npu.utils.hifloat8).

It presents its nominal dtype (float32 by default) and shape; the data is a uint8 tensor of HiF8 codes.
`HiFloat8Tensor.to_hifloat8(t)` encodes, `from_hifloat8(dtype)` / `float()` / `half()` / `bfloat16()` decode
(gradients pass straight through both). view, reshape, transpose, slicing, detach and clone keep the codes;
copying into one encodes, and every other operator computes on the decoded values (in-place ones encode their
result back), as torch_npu's does.
"""

import torch
from torch.utils._pytree import tree_map

from torch_npu.utils import hifloat8
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = []

aten = torch.ops.aten
_KEPT_VIEWS = (aten.view.default, aten.slice.Tensor, aten.transpose.int, aten._unsafe_view.default)


class _ToHiFloat8(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor):
        tensor = tensor.detach().contiguous()
        if tensor.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            tensor = tensor.float()
        return _HiFloat8Tensor(data=hifloat8.encode(tensor), dtype=tensor.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad


class _FromHiFloat8(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, dtype):
        return hifloat8.decode(tensor._data, dtype or tensor.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _Reshaped(torch.autograd.Function):
    """A view of the codes with another shape (view / reshape / transpose), gradients reshaped back."""

    @staticmethod
    def forward(ctx, tensor, reshape):
        ctx.shape = tensor.shape
        return _HiFloat8Tensor.make_like(tensor, data=reshape(tensor._data))

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.shape), None


class _HiFloat8Tensor(torch.Tensor):
    def __new__(cls, *, data, dtype=torch.float32):
        if data.element_size() != 1:
            raise ValueError(
                f"HiFloat8Tensor requires data buffer with 8-bit dtype (got dtype={data.dtype})"
                + pta_error(ErrCode.VALUE)
            )
        if data.requires_grad:
            raise ValueError("HiFloat8Tensor requires non-differentiable data buffer" + pta_error(ErrCode.VALUE))
        if data.device.type != "npu":
            data = data.npu()
        self = torch.Tensor._make_wrapper_subclass(
            cls, data.size(), strides=data.stride(), storage_offset=data.storage_offset(), dtype=dtype,
            layout=data.layout, requires_grad=False, device=data.device,
        )  # fmt: skip
        self._data = data
        return self

    @classmethod
    def make_like(cls, tensor, *, data, **kwargs):
        return _HiFloat8Tensor(data=data, dtype=kwargs.get("dtype", tensor.dtype))

    @classmethod
    def to_hifloat8(cls, tensor):
        """The HiF8 encoding of `tensor` (its nominal dtype is tensor's; other dtypes become float32)."""
        return _ToHiFloat8.apply(tensor)

    def from_hifloat8(self, dtype=None):
        """The decoded values as `dtype` (default: the nominal dtype)."""
        return _FromHiFloat8.apply(self, dtype)

    def __repr__(self):
        return f"HiFloat8Tensor(data={self.from_hifloat8(dtype=self.dtype)})"

    def float(self):
        return self.from_hifloat8(torch.float32)

    def half(self):
        return self.from_hifloat8(torch.float16)

    def bfloat16(self):
        return self.from_hifloat8(torch.bfloat16)

    def cpu(self):
        return self.from_hifloat8().cpu()

    def clone(self):
        return _HiFloat8Tensor.make_like(self, data=self._data.detach().clone())

    def view(self, *shape):
        return _Reshaped.apply(self, lambda data: data.view(*shape))

    def reshape(self, *shape):
        return _Reshaped.apply(self, lambda data: data.reshape(*shape))

    def transpose(self, dim0, dim1):
        return _Reshaped.apply(self, lambda data: data.transpose(dim0, dim1))

    def contiguous(self, *, memory_format=torch.contiguous_format):
        if self._data.is_contiguous(memory_format=memory_format):
            return self
        return _HiFloat8Tensor.make_like(self, data=self._data.contiguous(memory_format=memory_format))

    def to_dtype(self, dtype):
        """The same codes under another nominal dtype."""
        return _HiFloat8Tensor.make_like(self, data=self._data, dtype=dtype)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is aten.copy_.default:
            dst, src = args[0], args[1]
            if isinstance(dst, _HiFloat8Tensor):
                codes = src._data if isinstance(src, _HiFloat8Tensor) else hifloat8.encode(src.expand(dst.shape))
                dst._data.copy_(codes)
            else:
                dst.copy_(src.from_hifloat8())
            return dst
        if func in _KEPT_VIEWS:
            return _HiFloat8Tensor.make_like(args[0], data=func(args[0]._data, *args[1:], **kwargs))
        if func in (aten.detach.default, aten.alias.default):
            return _HiFloat8Tensor.make_like(args[0], data=args[0]._data)
        if func is aten.clone.default:
            return _HiFloat8Tensor.make_like(args[0], data=args[0]._data.clone())

        def decoded(t):
            return hifloat8.decode(t._data, t.dtype) if isinstance(t, _HiFloat8Tensor) else t

        plain_args, plain_kwargs = tree_map(decoded, args), tree_map(decoded, kwargs)
        out = func(*plain_args, **plain_kwargs)
        if func._schema.is_mutable:  # write the results of in-place arguments back as codes
            for argument, given, plain in zip(func._schema.arguments, args, plain_args):
                written = argument.alias_info is not None and argument.alias_info.is_write
                if written and isinstance(given, _HiFloat8Tensor):
                    given._data.copy_(hifloat8.encode(plain))
            return args[0]
        return out

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def _make_in_reduce_ex(cls, data, dtype):
        return _HiFloat8Tensor(data=data, dtype=dtype)

    def __reduce_ex__(self, protocol):
        return (_HiFloat8Tensor._make_in_reduce_ex, (self._data, self.dtype))

    def _get_data(self):
        return super().data

    def _set_data(self, tensor):
        with torch.no_grad():
            self.copy_(tensor)

    data = property(_get_data, _set_data)
