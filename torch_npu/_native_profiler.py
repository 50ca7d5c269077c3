"""torch_npu._C._profiler: the profiler's native interface as a child of torch_npu._C, importable with
``from torch_npu._C._profiler import ...`` as in torch_npu. Its members load torch_npu.profiler on first
use, so ``import torch_npu`` stays light."""

import sys
import types

__all__ = ["register"]


class _NativeProfilerModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):  # module introspection (inspect, pickle) must not load the profiler
            raise AttributeError(name)
        from torch_npu.profiler import _native

        members = _native.members()
        if name not in members:
            raise AttributeError(f"module 'torch_npu._C._profiler' has no attribute {name!r}")
        self.__dict__.update(members)
        return members[name]

    def __dir__(self):
        from torch_npu.profiler import _native

        return sorted(set(super().__dir__()) | set(_native.members()))


def register(c_module):
    module = _NativeProfilerModule(
        "torch_npu._C._profiler", "The profiler's native interface (torch_npu._C._profiler)."
    )
    c_module._profiler = module
    sys.modules["torch_npu._C._profiler"] = module
