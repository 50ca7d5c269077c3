"""Names some Ascend articles use that the real torch_npu does not have.

Where such a name maps onto a real mechanism vnpu gives it that behaviour; either way it warns once
that the name is a vnpu extension absent from torch_npu, so code that relies on it is flagged before
it reaches real hardware.
"""
from torch_npu.utils._warnings import npu_warn_once

__all__ = ["warn_extension", "accept_unknown_config"]


def warn_extension(name, effect):
    """One warning per name: `name` is not part of torch_npu; `effect` says what vnpu does with it."""
    npu_warn_once(("vnpu-extension", name),
                  f"{name} is a vnpu extension absent from torch_npu: {effect}. "
                  "Code using it will fail on a real Ascend installation.", stacklevel=4)


def accept_unknown_config(name, value):
    """torch.npu.config.<name> = value for a name torch_npu's config does not have."""
    warn_extension(f"torch.npu.config.{name}", f"the value {value!r} is stored and has no effect")
