"""torchair.dynamo_export and use_internal_format_weight."""

import os

import torch

from torchair.configs import CompilerConfig


def dynamo_export(*args, model, export_path="export_file", export_name="export", dynamic=False, config=None, **kwargs):
    """On Ascend: exports the model's graph as an offline GE model (air). On vnpu: exports it with
    torch.export and saves the ExportedProgram as <export_path>/<export_name>.pt2."""
    if config is not None and not isinstance(config, CompilerConfig):
        raise TypeError(f"config must be a torchair.CompilerConfig, got {type(config).__name__}")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    dynamic_shapes = None
    if dynamic:
        dynamic_shapes = [
            {d: torch.export.Dim.AUTO for d in range(a.dim())} if isinstance(a, torch.Tensor) else None for a in args
        ]
    program = torch.export.export(model, tuple(args), kwargs=kwargs or None, dynamic_shapes=dynamic_shapes)
    os.makedirs(export_path, exist_ok=True)
    path = os.path.join(export_path, f"{export_name}.pt2")
    torch.export.save(program, path)
    return path


def use_internal_format_weight(model):
    """Gives the weights of Linear and Conv layers the private formats the card computes with
    (FRACTAL_NZ, FRACTAL_Z); values are unchanged (torch_npu.get_npu_format shows the format)."""
    import torch_npu

    for module in model.modules():
        weight = getattr(module, "weight", None)
        if not isinstance(weight, torch.Tensor) or weight.device.type != "npu":
            continue
        if isinstance(module, torch.nn.Linear):
            module.weight.data = torch_npu.npu_format_cast(weight.data, 29)
        elif isinstance(module, (torch.nn.Conv2d, torch.nn.Conv3d)):
            module.weight.data = torch_npu.npu_format_cast(weight.data, 4 if weight.dim() == 4 else 33)
    return model
