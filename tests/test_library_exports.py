"""torch_npu._C exports only what is looked up from outside: calls between its own files stay direct."""

import shutil
import subprocess

import pytest

import torch_npu


def exported_names():
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("binutils' nm is not installed: the library's dynamic symbols cannot be listed")
    listing = subprocess.run(
        [nm, "-D", "--defined-only", "-C", torch_npu._C.__file__],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [line.split(" ", 2)[2] for line in listing.splitlines() if line.count(" ") >= 2]


def test_module_init_is_exported():
    assert "PyInit__C" in exported_names()


def test_no_vnpu_function_or_variable_is_exported():
    own = [name for name in exported_names() if name.startswith("vnpu::")]
    assert own == []
