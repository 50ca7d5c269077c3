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

_LIGHTNING_ACCELERATOR_WHY = (
    "Lightning has no npu accelerator: Trainer(accelerator='npu') is refused. vnpu registers "
    "torch_npu.contrib.lightning's NPUAccelerator under 'npu' in Lightning's accelerator registry, "
    "the way Lightning documents for new hardware."
)
_LIGHTNING_CONNECTOR_WHY = (
    "Lightning's Trainer gives one device of an accelerator it does not know a CPU single-device "
    "strategy, and runs '16-mixed'/'bf16-mixed' autocast on cuda for it; with accelerator='npu' the "
    "strategy gets the npu device and the precision plugin is NPUMixedPrecision (autocast on npu, "
    "torch_npu's GradScaler). Other accelerators keep Lightning's own choices."
)
for _package in ("lightning.pytorch", "pytorch_lightning"):
    PATCHES += (
        Patch(
            target=f"{_package}.accelerators.AcceleratorRegistry['npu']",
            module=f"{_package}.accelerators",
            why=_LIGHTNING_ACCELERATOR_WHY,
            when=f"on import of {_package}",
            apply=f"torch_npu._patches.lightning_npu:register_accelerator:{_package}.accelerators",
        ),
        Patch(
            target=f"{_package}.trainer.connectors.accelerator_connector._AcceleratorConnector."
                   "_choose_strategy / _check_and_init_precision",
            module=f"{_package}.trainer.connectors.accelerator_connector",
            why=_LIGHTNING_CONNECTOR_WHY,
            when=f"on import of {_package}, for accelerator='npu' only",
            apply=f"torch_npu._patches.lightning_npu:choose_npu_strategy_and_precision:"
                  f"{_package}.trainer.connectors.accelerator_connector",
        ),
        Patch(
            target=f"{_package}.strategies.ddp.DDPStrategy._setup_model",
            module=f"{_package}.strategies.ddp",
            why="Lightning wraps the model in DistributedDataParallel inside torch.cuda.stream(torch.cuda.Stream()) "
                "for every non-CPU device; on npu the side stream is torch.npu's, as on cuda it is cuda's.",
            when=f"on import of {_package}, for models on npu only",
            apply=f"torch_npu._patches.lightning_npu:wrap_ddp_on_an_npu_stream:{_package}.strategies.ddp",
        ),
    )

__all__ = ["PATCHES", "Patch", "apply_patches", "applied_patches"]
