"""torch_npu.contrib: detection, attention and training helpers of torch_npu's contrib package."""

from torch_npu.contrib.function import *  # noqa: F401,F403
from torch_npu.contrib.function import __all__ as _function_names
from torch_npu.contrib.module import *  # noqa: F401,F403
from torch_npu.contrib.module import __all__ as _module_names

__all__ = list(_function_names) + list(_module_names)


def __getattr__(name):
    if name == "amp":
        import importlib

        return importlib.import_module("torch_npu.contrib.amp")
    raise AttributeError(f"module 'torch_npu.contrib' has no attribute {name!r}")
