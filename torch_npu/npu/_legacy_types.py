"""Legacy typed storages (torch.npu.FloatStorage ...) and tensor types (torch.npu.FloatTensor ...).

Tensor types behave like torch.cuda's: ``torch.npu.FloatTensor(2, 3)`` makes an uninitialised
float32 npu tensor, ``torch.npu.FloatTensor([1, 2])`` one from data, and ``isinstance(t,
torch.npu.FloatTensor)`` checks dtype and device.
"""

import torch
from torch._utils import classproperty

_TYPES = {
    "Double": torch.float64,
    "Float": torch.float32,
    "Half": torch.float16,
    "BFloat16": torch.bfloat16,
    "Long": torch.int64,
    "Int": torch.int32,
    "Short": torch.int16,
    "Char": torch.int8,
    "Byte": torch.uint8,
    "Bool": torch.bool,
}
_STORAGE_TYPES = ("Double", "Float", "Half", "Long", "Int", "Short", "Char", "Byte", "Bool", "BFloat16")


class _NPULegacyStorage(torch.storage._LegacyStorage):
    @classmethod
    def from_buffer(cls, *args, **kwargs):
        raise RuntimeError("from_buffer: Not available for NPU storage")

    @classmethod
    def _new_with_weak_ptr(cls, *args, **kwargs):
        raise RuntimeError("_new_with_weak_ptr: Not available for NPU storage")

    @classmethod
    def _new_shared_filename(cls, manager, obj, size, *, device=None, dtype=None):
        raise RuntimeError("_new_shared_filename: Not available for NPU storage")


class _LegacyTensorMeta(type):
    def __instancecheck__(cls, obj):
        return (
            isinstance(obj, torch.Tensor)
            and obj.device.type == "npu"
            and obj.dtype == cls.dtype
            and obj.layout == torch.strided
        )

    def __repr__(cls):
        return f"<class 'torch.npu.{cls.__name__}'>"


class _LegacyTensor(metaclass=_LegacyTensorMeta):
    dtype = None
    is_npu = True
    is_sparse = False

    def __new__(cls, *args, device=None):
        device = device if device is not None else "npu"
        if len(args) == 1 and isinstance(args[0], torch.Tensor):
            return args[0].to(device=device, dtype=cls.dtype)
        if len(args) == 1 and isinstance(args[0], torch.Size):
            return torch.empty(args[0], dtype=cls.dtype, device=device)
        if len(args) == 1 and not isinstance(args[0], int):
            return torch.tensor(args[0], dtype=cls.dtype, device=device)
        return torch.empty(args, dtype=cls.dtype, device=device)


def _make_storage(prefix, dtype):
    name = prefix + "Storage"
    return type(
        name,
        (_NPULegacyStorage,),
        {
            "dtype": classproperty(lambda self, d=dtype: d),
            "_dtype": classproperty(lambda self, d=dtype: d),
            "__module__": "torch_npu.npu",
            "__qualname__": name,
        },
    )


def _make_tensor_type(prefix, dtype):
    name = prefix + "Tensor"
    return _LegacyTensorMeta(name, (_LegacyTensor,), {"dtype": dtype, "__module__": "torch.npu", "__qualname__": name})


storages = {p + "Storage": _make_storage(p, _TYPES[p]) for p in _STORAGE_TYPES}
tensor_types = {p + "Tensor": _make_tensor_type(p, d) for p, d in _TYPES.items()}
