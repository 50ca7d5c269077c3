"""vnpu's torch_npu: a software Ascend NPU for PyTorch.

``import torch_npu`` (or just ``import torch``: the package is a ``torch.backends`` entry point)
gives PyTorch an ``npu`` device whose memory is host memory and whose operators run PyTorch's CPU
kernels on that memory without copying, so programs written for Ascend run anywhere and compute
exactly what they compute on the CPU.
"""

import os
import sys

if "torch" not in sys.modules:
    # Importing torch would load this package again through the torch.backends entry point
    # while it is half-initialised; switch autoload off for that one import.
    _autoload_env = os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD")
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    try:
        import torch
    finally:
        if _autoload_env is None:
            del os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"]
        else:
            os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = _autoload_env
else:
    import torch

import gc  # noqa: E402

# Importing torch_npu allocates ~1 million objects (operator tables, ~450 operators, modules); a cyclic collection in
# the middle scans all of torch's objects too (~90 ms, a third of the import). Collection pauses until the end, where
# the import's objects move to the permanent generation, and resumes even when the import fails.
_collecting = gc.isenabled()
gc.disable()
try:
    from vnpu._version import __version__ as _vnpu_version  # noqa: E402

    # torch_npu's version is its torch version (2.13.0, then .post<n> for its releases); vnpu's release is the PEP 440
    # local label, so version parsers (packaging, importlib.metadata) read it and compare it as torch_npu 2.13.0.
    __version__ = f"2.13.0+vnpu.{_vnpu_version}"

    def _autoload():
        """Entry point of the ``torch.backends`` group: importing this package did the work."""

    def _refuse_second_accelerator():
        accelerator = torch._C._get_accelerator()
        if accelerator.type not in ("cpu", "npu", "privateuseone"):
            raise RuntimeError(
                f"Two accelerators cannot be used at the same time in PyTorch: npu and {accelerator.type}. "
                "You can install the CPU version of PyTorch to use your NPU device, or use the "
                f"{accelerator.type} device without torch_npu (set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to stop "
                "`import torch` from loading it).\nERR00007 PTA feature not supported"
            )

    _refuse_second_accelerator()

    from torch_npu import _C  # noqa: E402,F401  (loads the C++ core)
    from torch_npu._c_children import register as _register_c_children  # noqa: E402

    for _dtype in _register_c_children(_C):  # torch_npu.hifloat8, ...: torch_npu's dtypes outside PyTorch
        globals()[_dtype.name] = _dtype
    del _dtype
    from torch_npu._device_registration import register_npu_device  # noqa: E402

    unsupported_dtype = [torch.quint8, torch.quint4x2, torch.quint2x4, torch.qint32, torch.qint8]

    register_npu_device(unsupported_dtype)

    from torch_npu import _logging  # noqa: E402
    from torch_npu.utils._env import check_environment  # noqa: E402

    _logging.configure()
    check_environment()

    from torch_npu import npu, ops  # noqa: E402,F401
    from torch_npu.npu._format import Format  # noqa: E402
    from torch_npu.ops.format_cast import (  # noqa: E402
        empty_with_format,
        get_npu_format,
        get_storage_size,
        npu_format_cast,
        npu_format_cast_,
    )
    from torch_npu.ops.optimizer_ops import npu_apply_adam_w_out  # noqa: E402,F401  (torch_npu's positional out form)
    from torch_npu.utils._vnpu_extensions import apply_extension_environment  # noqa: E402

    apply_extension_environment()

    # The modules torch_npu loads at import (code and tools rely on finding them in sys.modules).
    _EAGER_MODULES = (
        "torch_npu.npu.amp",
        "torch_npu._afd",
        "torch_npu.optim",
        "torch_npu.dynamo",
        "torch_npu.profiler",
        "torch_npu.asd.checksum",
        "torch_npu.op_plugin.meta._meta_registrations",
        "torch_npu.utils._dynamo",
        "torch_npu.utils._inductor",
        "torch_npu.utils.custom_ops",
        "torch_npu.utils.syncbatchnorm",
        "torch_npu._op_plugin_docs",  # the operators' documentation; not kept as an attribute
    )

    def _load_eager_modules():
        import importlib

        for module in _EAGER_MODULES:
            importlib.import_module(module)
        del globals()["_op_plugin_docs"]
        sys.modules["torch_npu.utils.custom_ops"].bind_operators()

    _load_eager_modules()

    from torch_npu._patches import PATCHES as _PATCHES  # noqa: E402
    from torch_npu._patches import apply_patches as _apply_patches  # noqa: E402

    _apply_patches(_PATCHES)

    def _registered_operators():
        from torch_npu.ops.registration import EXPORTED

        return list(EXPORTED)

    _LAZY_SUBMODULES = {"contrib", "testing", "nn"}
    # Top-level names loaded on first access (listed by dir() and, when public, __all__; not cached before use).
    _LAZY_APIS = {
        "matmul_checksum": ("torch_npu.asd.checksum", "_matmul_checksum"),
        "erase_stream": ("torch_npu.npu.streams", "erase_stream"),
        "HiFloat8Tensor": ("torch_npu.utils.hif8_tensor", "_HiFloat8Tensor"),
        "_ShardedGradScaler": ("torch_npu.npu.amp.sharded_grad_scaler", "_ShardedGradScaler"),
        "npu_relu6": ("torch_npu.utils._vnpu_extensions", "npu_relu6"),
    }

    def __getattr__(name):
        import importlib

        if name in _LAZY_SUBMODULES:
            return importlib.import_module(f"torch_npu.{name}")
        if name in _LAZY_APIS:
            module, attribute = _LAZY_APIS[name]
            value = globals()[name] = getattr(importlib.import_module(module), attribute)  # cached after first use
            return value
        raise AttributeError(f"module 'torch_npu' has no attribute {name!r}")

    def __dir__():
        return sorted(set(globals()) | _LAZY_SUBMODULES | set(_LAZY_APIS))

    from torch_npu.distributed import register_backends as _register_distributed_backends  # noqa: E402

    _register_distributed_backends()
    from torch_npu.distributed import ParallelStore  # noqa: E402,F401  (torch_npu.ParallelStore, not in __all__)

    if os.environ.get("TORCH_TRANSFER_TO_NPU") == "1":
        import torch_npu.contrib.transfer_to_npu  # noqa: F401,E402

    if _C._plan_mode():  # planning mode: the report `vnpu plan` reads, written at exit
        from torch_npu.npu import _plan  # noqa: E402

        _plan.install()

    if "TORCH_NPU_SANITIZER" in os.environ:  # torch_npu's stream sanitizer (a debugging tool); set at all, as there
        from torch_npu.npu._sanitizer import enable_npu_sanitizer as _enable_npu_sanitizer  # noqa: E402

        _enable_npu_sanitizer()

    if os.environ.get("VNPU_PROFILE_OUTPUT"):  # `msprof --application` / `vnpu profile --`: profile the whole program
        from torch_npu.profiler.program_profile import start_from_env as _start_program_profile  # noqa: E402

        _start_program_profile()

    __all__ = [
        "npu",
        "Format",
        "erase_stream",
        "HiFloat8Tensor",
        "matmul_checksum",
        "npu_format_cast",
        "npu_format_cast_",
        "get_npu_format",
        "empty_with_format",
        "get_storage_size",
    ]
    # every public operator of the npu namespace registered so far (later ones add themselves)
    __all__ += [name for name in _registered_operators() if not name.startswith("_") and name not in __all__]
finally:
    if _collecting:
        gc.enable()

# torch's and torch_npu's import-time objects (modules, functions, operator tables: ~1 million) live as long as
# the process. Moving them to the permanent generation keeps every later cyclic collection, and the one at exit,
# from scanning them again (~0.2 s less at exit; gen-2 collections during training scan only the program's own
# objects). Objects created after this point are collected as usual.
gc.freeze()
