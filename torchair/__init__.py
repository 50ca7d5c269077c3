"""torchair, torch_npu's graph-mode package, on vnpu.

    import torch, torch_npu, torchair
    config = torchair.CompilerConfig()
    config.mode = "reduce-overhead"            # or "max-autotune" (the default)
    npu_backend = torchair.get_npu_backend(compiler_config=config)
    model = torch.compile(model, backend=npu_backend)

On Ascend, torchair compiles graphs with GE (max-autotune) or captures them as aclgraphs
(reduce-overhead). On vnpu, max-autotune runs the ATen graphs GE would receive and reduce-overhead
replays them as NPU graphs; see torchair.configs for what each option does here. Names torchair has
and vnpu does not provide raise AttributeError saying so.
"""

from torchair import inference, ops, scope
from torchair._backend import get_compiler, get_npu_backend
from torchair._export import dynamo_export, use_internal_format_weight
from torchair._logging import logger
from torchair.configs import CompilerConfig

__all__ = [
    "CompilerConfig",
    "get_compiler",
    "get_npu_backend",
    "dynamo_export",
    "use_internal_format_weight",
    "patch_for_hcom",
    "inference",
    "ops",
    "scope",
    "logger",
]


def patch_for_hcom():
    """On Ascend this makes collective operators traceable into GE graphs; on vnpu hccl collectives
    are traced by Dynamo as they are, so there is nothing to patch."""
    return None


def __getattr__(name):
    raise AttributeError(f"torchair.{name} is not provided by vnpu's torchair (it provides {', '.join(__all__)})")
