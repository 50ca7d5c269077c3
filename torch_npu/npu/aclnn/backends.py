"""aclnn backend information."""

import warnings


def version():
    """The aclnn library version: vnpu has no aclnn library, so None (as torch_npu returns when it
    cannot tell)."""
    warnings.warn("torch_npu.npu.aclnn.version: vnpu runs PyTorch's CPU kernels, there is no aclnn library.")
    return None
