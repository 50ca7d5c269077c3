"""torch_npu.utils.exposed_api: the names of the operators torch_npu exposes as torch_npu.<name>."""

__all__ = []


def __getattr__(name):
    if name == "public_npu_functions":  # read when asked: operators registered later are included
        from torch_npu.ops.registration import EXPORTED

        return [op for op in EXPORTED if not op.startswith("_")]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
