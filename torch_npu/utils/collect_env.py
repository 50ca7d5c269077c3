"""Environment report for bug reports: ``python -m torch_npu.utils.collect_env``.

Like torch.utils.collect_env, plus torch_npu's version, the CANN version (vnpu has no CANN: it
says so) and the virtual NPU's SoC profile and device count."""

import locale
import os
import sys
from collections import namedtuple

from torch.utils import collect_env as _torch_env

__all__ = [
    "SystemEnv",
    "get_env_info",
    "get_pretty_env_info",
    "pretty_str",
    "main",
    "get_cann_version",
    "get_torch_npu_version",
    "get_torch_npu_install_path",
    "check_directory_path_readable",
    "check_path_owner_consistent",
]

SystemEnv = namedtuple(
    "SystemEnv",
    [
        "torch_version",
        "torch_npu_version",
        "is_debug_build",
        "gcc_version",
        "clang_version",
        "cmake_version",
        "os",
        "libc_version",
        "python_version",
        "python_platform",
        "pip_version",
        "pip_packages",
        "conda_packages",
        "caching_allocator_config",
        "is_xnnpack_available",
        "cpu_info",
        "cann_version",
    ],
)


def check_path_owner_consistent(path: str):
    """Raise if `path` is not owned by the current user (torch_npu refuses such install paths)."""
    if not os.path.exists(path):
        raise RuntimeError(f"The path does not exist: {path}")
    if hasattr(os, "getuid") and os.stat(path).st_uid != os.getuid() and os.getuid() != 0:
        raise RuntimeError(f"The path {path} is not owned by the current user")


def check_directory_path_readable(path):
    check_path_owner_consistent(path)
    if os.path.islink(path):
        raise RuntimeError(f"Invalid path is a soft chain: {path}")
    if not os.access(path, os.R_OK):
        raise RuntimeError(f"The path permission check failed: {path}")


def get_torch_npu_install_path():
    import torch_npu

    return os.path.dirname(os.path.abspath(torch_npu.__file__))


def get_torch_npu_version():
    import torch_npu

    return torch_npu.__version__


def get_cann_version():
    """vnpu's answer for the CANN version: there is no CANN, the NPU is vnpu's software device."""
    from torch_npu.npu.utils import get_cann_version as cann

    return f"{cann()} (no CANN installed: vnpu's software NPU)"


def _npu_summary():
    import torch_npu

    soc = torch_npu._C._soc_profile()
    return f"{torch_npu._C._device_count()} x {soc['name']} (vnpu software NPU, {soc['total_memory'] >> 30} GiB each)"


def get_env_info():
    run = _torch_env.run
    import torch

    pip_version, pip_list = _torch_env.get_pip_packages(run, {"torch", "numpy", "vnpu", "torch_npu", "torchvision"})
    return SystemEnv(
        torch_version=torch.__version__,
        torch_npu_version=get_torch_npu_version(),
        is_debug_build=str(torch.version.debug),
        gcc_version=_torch_env.get_gcc_version(run),
        clang_version=_torch_env.get_clang_version(run),
        cmake_version=_torch_env.get_cmake_version(run),
        os=_torch_env.get_os(run),
        libc_version=_torch_env.get_libc_version(),
        python_version=f"{sys.version.replace(chr(10), ' ')} ({sys.maxsize.bit_length() + 1}-bit runtime)",
        python_platform=_torch_env.get_python_platform(),
        pip_version=pip_version,
        pip_packages=pip_list,
        conda_packages=_torch_env.get_conda_packages(run),
        caching_allocator_config=os.environ.get("PYTORCH_NPU_ALLOC_CONF", ""),
        is_xnnpack_available=_torch_env.is_xnnpack_available(),
        cpu_info=_torch_env.get_cpu_info(run),
        cann_version=get_cann_version(),
    )


def pretty_str(envinfo):
    lines = [
        f"PyTorch version: {envinfo.torch_version}",
        f"Torch-npu version: {envinfo.torch_npu_version}",
        f"Is debug build: {envinfo.is_debug_build}",
        "",
        f"OS: {envinfo.os}",
        f"GCC version: {envinfo.gcc_version}",
        f"Clang version: {envinfo.clang_version}",
        f"CMake version: {envinfo.cmake_version}",
        f"Libc version: {envinfo.libc_version}",
        "",
        f"Python version: {envinfo.python_version}",
        f"Python platform: {envinfo.python_platform}",
        "",
        f"CANN: {envinfo.cann_version}",
        f"NPU: {_npu_summary()}",
        f"PYTORCH_NPU_ALLOC_CONF: {envinfo.caching_allocator_config or '(unset)'}",
        f"Is XNNPACK available: {envinfo.is_xnnpack_available}",
        "",
        "CPU:",
        str(envinfo.cpu_info),
        "",
        f"Versions of relevant libraries ({envinfo.pip_version}):",
        str(envinfo.pip_packages or "[pip] (none found)"),
    ]
    return "\n".join(lines)


def get_pretty_env_info():
    return pretty_str(get_env_info())


def main():
    print("Collecting environment information...")
    print(get_pretty_env_info())


if __name__ == "__main__":
    locale.setlocale(locale.LC_ALL, "")
    main()
