"""Building C++ extensions for npu (torch_npu.utils.cpp_extension.NpuExtension).

vnpu's npu is PyTorch's PrivateUse1 device, so an extension registers npu kernels with
``TORCH_LIBRARY_IMPL(<ns>, PrivateUse1, m)`` against plain ATen; NpuExtension is a CppExtension
that also sees torch_npu's headers."""

import os

from torch.utils.cpp_extension import CppExtension

__all__ = ["NpuExtension"]


def _include_paths():
    import torch_npu

    package = os.path.dirname(os.path.abspath(torch_npu.__file__))
    return [os.path.dirname(package), os.path.join(package, "csrc")]


def NpuExtension(name, sources, *args, **kwargs):
    """A setuptools Extension for C++ code that runs on npu (see CppExtension for the arguments)."""
    kwargs["include_dirs"] = list(kwargs.get("include_dirs", [])) + _include_paths()
    define_macros = list(kwargs.get("define_macros", []))
    define_macros.append(("VNPU_EXTENSION", "1"))
    kwargs["define_macros"] = define_macros
    return CppExtension(name, sources, *args, **kwargs)
