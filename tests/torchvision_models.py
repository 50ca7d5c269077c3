"""Importing torchvision's models on this machine.

PyPI's torchvision 0.28 wheel is built for CUDA; its C++ operators cannot load beside torch
2.13+cpu, and `import torchvision` then fails registering fake kernels for torchvision::nms/qnms
("operator torchvision::nms does not exist"). The model definitions are plain Python: defining the
two operator schemas (no kernels) lets torchvision import, and its models build and run; only
torchvision.ops would stay unavailable. Pretrained weights cannot be downloaded here, so
`pretrained=True` gets the freshly initialised weights of the same architecture.
"""
import importlib.util

import torch

_lib = None


def import_torchvision():
    """torchvision, or None when it is not installed."""
    global _lib
    if importlib.util.find_spec("torchvision") is None:
        return None
    try:
        import torchvision  # noqa: F401
    except RuntimeError as e:
        if "torchvision::nms" not in str(e):
            raise
        _lib = torch.library.Library("torchvision", "DEF")  # noqa: TOR901
        _lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        import sys

        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        import torchvision  # noqa: F401
    import torchvision
    from torchvision.models import _api

    def local_weights(self, *args, **kwargs):
        builder = _api.get_model_builder(self.__class__.__name__.replace("_Weights", "").lower())
        return builder(weights=None).state_dict()

    _api.WeightsEnum.get_state_dict = local_weights
    return torchvision
