"""Builds the C++ core `torch_npu._C` against the torch that is already installed.

Install with `pip install --no-build-isolation -e .` so the extension links the same torch
the tests import (build isolation would fetch a different torch wheel). Every build (pip's editable
install, `setup.py build_ext --inplace`) keeps ninja's objects in build/temp, so the C++ core is
compiled once and later builds recompile only what changed. Set VNPU_DEBUG_BUILD=1 for debug info.
"""

import glob
import os

# Building must not load an installed (possibly stale or half-built) torch_npu through torch's
# backend autoload.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

from setuptools import setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))


class BuildOnce(BuildExtension.with_options(use_ninja=True)):
    """pip's editable build would compile in a fresh temporary directory every time."""

    def finalize_options(self):
        super().finalize_options()
        self.build_temp = os.path.join(here, "build", "temp")


sources = sorted(
    os.path.relpath(p, here) for p in glob.glob(os.path.join(here, "torch_npu", "csrc", "**", "*.cpp"), recursive=True)
)

setup(
    ext_modules=[
        CppExtension(
            name="torch_npu._C",
            sources=sources,
            include_dirs=[os.path.join(here, "torch_npu", "csrc")],
            # No debug info by default: a third less compile time, a 60 MB smaller library.
            # The library exports only what Python and the dispatcher look up (the module's init; operator
            # registrations run as static initialisers): with default visibility, every call between its
            # files went through the PLT, every global was read through the GOT and nothing inlined across
            # an exported name, which cost about 0.1 us per operator on the npu hot path.
            extra_compile_args=[
                "-O2",
                "-Wno-unused-parameter",
                "-fvisibility=hidden",
                "-fvisibility-inlines-hidden",
                "-fno-semantic-interposition",
            ]
            + ([] if os.environ.get("VNPU_DEBUG_BUILD") else ["-g0"]),
            # The inline functions of torch's headers this library instantiates bind to its own copies.
            extra_link_args=["-Wl,-Bsymbolic-functions"],
        )
    ],
    cmdclass={"build_ext": BuildOnce},
)
