"""torch_npu.utils: tensor combining, flops counting, environment report, async saving, thread
affinity, extension building."""

from torch_npu.utils import storage  # noqa: F401  (torch_npu.utils.storage._rebuild_npu_tensor)
from torch_npu.utils.affinity import reset_thread_affinity, set_thread_affinity
from torch_npu.utils.asd_detector import register_asd_hook, set_asd_loss_scale  # noqa: F401
from torch_npu.utils.combine_tensors import get_part_combined_tensor, is_combined_tensor_valid, npu_combine_tensors
from torch_npu.utils.flops_count import FlopsCounter
from torch_npu.utils.serialization import save_async

__all__ = [
    "npu_combine_tensors",
    "get_part_combined_tensor",
    "is_combined_tensor_valid",
    "FlopsCounter",
    "save_async",
    "set_thread_affinity",
    "reset_thread_affinity",
    "get_cann_version",
]


def get_cann_version(module="CANN"):
    """The version of a CANN module. vnpu has no CANN: every module answers "<version>+vnpu", the
    CANN release whose APIs vnpu's software NPU follows."""
    from torch_npu.npu.utils import get_cann_version as cann

    return cann(module)


_LAZY_SUBMODULES = {
    "collect_env",
    "cpp_extension",
    "syncbatchnorm",
    "profiler",
    "serialization",
    "flops_count",
    "combine_tensors",
    "affinity",
}


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"torch_npu.utils.{name}")
    raise AttributeError(f"module 'torch_npu.utils' has no attribute {name!r}")
