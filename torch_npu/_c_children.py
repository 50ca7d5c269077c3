"""The children of torch_npu._C that torch_npu's Python layer and tools import (``torch_npu._C._profiler``,
``._cd``, ``._logging``, ``._flops_count``), registered in sys.modules so ``from torch_npu._C._x import ...``
works. Each is a thin native-style interface over vnpu's implementation:

- _profiler: the profiler's configuration object and host clocks (loaded with torch_npu.profiler on first use);
- _cd: DType, the numbers torch_npu gives the dtypes PyTorch lacks (torch_npu.hifloat8 = 290, ...); vnpu's
  operators refuse them with a clear error, as they compute none of these formats;
- _logging: _LogContext, which sets the levels of the torch_npu.<module> loggers from torch._logging's state;
- _flops_count: _FlopCountContext, the process-wide matmul flops counter (torch_npu.utils.FlopsCounter);
- _mstx: _mark / _mark_on_host / _range_start / _range_start_on_host / _range_end, which torch_npu.npu.mstx calls
  once it has checked its arguments (the recorders live in torch_npu/npu/mstx.py, loaded on first use).
"""

import enum
import logging
import sys
import types

import torch

__all__ = ["register"]


class _LazyChild(types.ModuleType):
    """A child whose members come from vnpu's Python layer on first use (importing that layer while torch_npu
    imports would be circular or slow); a name set on the module first (a test's stub) takes precedence."""

    def __init__(self, name, doc, members):
        super().__init__(name, doc)
        self.__dict__["_load_members"] = members  # () -> {name: member}

    def __getattr__(self, name):
        if name.startswith("__"):  # module introspection (inspect, pickle) must not load anything
            raise AttributeError(name)
        members = self.__dict__["_load_members"]()
        if name not in members:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        for member, value in members.items():
            self.__dict__.setdefault(member, value)
        return self.__dict__[name]

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.__dict__["_load_members"]()))


def _profiler_members():
    from torch_npu.profiler import _native

    return _native.members()


def _mstx_members():
    from torch_npu.npu.mstx import NATIVE

    return NATIVE


class DTypeNumber(enum.IntEnum):
    """torch_npu's dtype constants (torch_npu.<name>): the number its operators take in their dtype arguments, an
    aclDataType + 256. Those PyTorch has too stand for its dtype (TORCH_DTYPES); the rest are formats of the card."""

    float32 = 256
    float16 = 257
    int8 = 258
    int32 = 259
    uint8 = 260
    int16 = 262
    uint16 = 263
    uint32 = 264
    int64 = 265
    uint64 = 266
    float64 = 267
    bool = 268
    string = 269
    complex64 = 272
    complex128 = 273
    bfloat16 = 283
    int4 = 285
    uint1 = 286
    complex32 = 289
    hifloat8 = 290
    float8_e5m2 = 291
    float8_e4m3fn = 292
    float8_e8m0fnu = 293
    float6_e3m2 = 294
    float6_e2m3 = 295
    float4_e2m1fn_x2 = 296
    float4_e1m2fn_x2 = 297


TORCH_DTYPES = {
    number: getattr(torch, number.name)
    for number in DTypeNumber
    if number.name not in ("string", "complex32") and isinstance(getattr(torch, number.name, None), torch.dtype)
}  # fmt: skip


class DType:
    """torch_npu._C._cd.DType: the dtypes as attributes (torch_npu exports each under its name)."""


for _number in DTypeNumber:
    setattr(DType, _number.name, _number)
del _number


class _Singleton:
    """torch_npu's native contexts are process-wide singletons reached through GetInstance()."""

    _instance = None

    @classmethod
    def GetInstance(cls):  # noqa: N802 (torch_npu's name)
        if cls.__dict__.get("_instance") is None:
            cls._instance = cls()
        return cls._instance


class _LogContext(_Singleton):
    """torch_npu's log levels, fed from torch._logging (qualified logger name -> level)."""

    def setLogs(self, levels):  # noqa: N802 (torch_npu's name)
        """Apply the levels of the torch_npu.* loggers among `levels` ({name: logging level})."""
        for name, level in dict(levels).items():
            if name == "torch_npu" or name.startswith("torch_npu."):
                logging.getLogger(name).setLevel(level)


class _FlopCountContext(_Singleton):
    """The flops counter behind torch_npu.utils.FlopsCounter, with torch_npu's native method names."""

    @staticmethod
    def _counter():
        from torch_npu.utils.flops_count import FlopsCounter

        return FlopsCounter()

    def enable(self):
        self._counter().start()

    def disable(self):
        counter = self._counter()
        recorded, traversed = counter.get_flops()
        counter.stop()
        counter._recorded, counter._traversed = recorded, traversed  # disable keeps the counts; reset drops them

    def reset(self):
        counter = self._counter()
        counter._recorded = counter._traversed = 0

    def pause(self):
        self._counter().pause()

    def resume(self):
        self._counter().resume()

    @property
    def recordedCount(self):  # noqa: N802 (torch_npu's name)
        return self._counter().get_flops()[0]

    @property
    def traversedCount(self):  # noqa: N802 (torch_npu's name)
        return self._counter().get_flops()[1]


def _module(name, doc, **members):
    module = types.ModuleType(f"torch_npu._C.{name}", doc)
    module.__dict__.update(members)
    return module


def register(c_module):
    children = {
        "_profiler": _LazyChild("torch_npu._C._profiler", "The profiler's native interface.", _profiler_members),
        "_cd": _module("_cd", "torch_npu's dtypes outside PyTorch.", DType=DType),
        "_logging": _module("_logging", "torch_npu's log levels.", _LogContext=_LogContext),
        "_flops_count": _module("_flops_count", "The matmul flops counter.", _FlopCountContext=_FlopCountContext),
        "_mstx": _LazyChild("torch_npu._C._mstx", "mstx marks and ranges.", _mstx_members),
    }
    for name, module in children.items():
        setattr(c_module, name, module)
        sys.modules[f"torch_npu._C.{name}"] = module
    return DTypeNumber
