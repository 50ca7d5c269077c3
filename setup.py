"""Builds the C++ core `torch_npu._C` against the torch that is already installed.

Install with `pip install --no-build-isolation -e .` so the extension links the same torch
the tests import (build isolation would fetch a different torch wheel).
"""
import glob
import os

# Building must not load an installed (possibly stale or half-built) torch_npu through torch's
# backend autoload.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

from setuptools import setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
sources = sorted(
    os.path.relpath(p, here)
    for p in glob.glob(os.path.join(here, "torch_npu", "csrc", "**", "*.cpp"), recursive=True)
)

setup(
    ext_modules=[
        CppExtension(
            name="torch_npu._C",
            sources=sources,
            include_dirs=[os.path.join(here, "torch_npu", "csrc")],
            extra_compile_args=["-O2", "-Wno-unused-parameter"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
