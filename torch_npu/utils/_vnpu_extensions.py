"""Names some Ascend articles use that the real torch_npu does not have.

Where such a name maps onto a real mechanism vnpu gives it that behaviour; either way it warns once
that the name is a vnpu extension absent from torch_npu, so code that relies on it is flagged before
it reaches real hardware.
"""

from torch_npu.utils._warnings import npu_warn_once

__all__ = ["warn_extension", "accept_unknown_config"]


def warn_extension(name, effect, stacklevel=4):
    """One warning per name: `name` is not part of torch_npu; `effect` says what vnpu does with it."""
    npu_warn_once(
        ("vnpu-extension", name),
        f"{name} is a vnpu extension absent from torch_npu: {effect}. "
        "Code using it will fail on a real Ascend installation.",
        stacklevel=stacklevel,
    )


def accept_unknown_config(name, value):
    """torch.npu.config.<name> = value for a name torch_npu's config does not have."""
    warn_extension(f"torch.npu.config.{name}", f"the value {value!r} is stored and has no effect", stacklevel=6)


# Environment variables some articles set that torch_npu does not read.
_EXTENSION_ENV = {
    "NPU_FORCE_FP16": "1 computes float32 matmul and convolution in float16, as "
    "torch.npu.set_option({'ACL_PRECISION_MODE': 'allow_fp32_to_fp16'}) does",
    "NPU_AUTO_MEMORY_OPTIMIZE": "accepted with no effect (vnpu's caching allocator always reuses memory)",
    "NPU_COMPILE_MODE": "accepted with no effect (see torch.npu.set_compile_mode)",
    "NPU_COMPILER_CACHE_SIZE": "accepted with no effect (operators are not compiled on vnpu)",
}


def apply_extension_environment(environ=None):
    """Warn once about each extension variable that is set; NPU_FORCE_FP16=1 selects fp16 compute."""
    import os

    environ = os.environ if environ is None else environ
    for name, effect in _EXTENSION_ENV.items():
        value = environ.get(name)
        if value is None:
            continue
        warn_extension(f"environment variable {name}", effect)
        if name == "NPU_FORCE_FP16":
            if value not in ("0", "1"):
                from torch_npu.utils._error_code import ErrCode, pta_error

                raise ValueError(
                    f"Invalid value {value!r} of environment variable NPU_FORCE_FP16: expected one of "
                    "0, 1" + pta_error(ErrCode.VALUE)
                )
            if value == "1":
                from torch_npu.npu.npu_config import set_option

                set_option({"ACL_PRECISION_MODE": "allow_fp32_to_fp16"})


def npu_relu6(input):  # noqa: A002  (the article's argument name)
    """torch_npu.npu_relu6 of some articles: min(max(x, 0), 6)."""
    import torch.nn.functional as F

    warn_extension("torch_npu.npu_relu6", "computes torch.nn.functional.relu6")
    return F.relu6(input)


def precompile(ops=None):
    """torch_npu.npu.precompile(['conv', 'matmul']) of some articles: vnpu compiles nothing."""
    warn_extension("torch_npu.npu.precompile", "accepted with no effect (operators are not compiled on vnpu)")
