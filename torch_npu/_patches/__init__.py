"""Every change vnpu makes to another library, declared in one place with its reason.

A patch names its target, says why it exists and when it applies, and points at the function that
applies it. `apply_patches()` (called once by ``import torch_npu``) applies the patches whose
libraries are already imported and arranges for the others to be applied the moment their library
is imported, so nothing is imported early and nothing is patched silently.
"""
from torch_npu._patches.registry import Patch, apply_patches, applied_patches

PATCHES = (
    Patch(
        target="torchvision.extension._has_ops",
        module="torchvision.extension",
        why=(
            "PyPI's x86_64 torchvision wheels are CUDA builds: beside the CPU build of torch their C++ "
            "operators cannot load and `import torchvision` fails ('operator torchvision::nms does not "
            "exist'). vnpu then defines torchvision's operators with its own CPU kernels (npu tensors "
            "reach them through the redirect) and tells torchvision its operators are available."
        ),
        when="on import of torchvision, only if torchvision's own extension did not load",
        apply="torch_npu._patches.torchvision_ops:provide_operators",
    ),
)

__all__ = ["PATCHES", "Patch", "apply_patches", "applied_patches"]
