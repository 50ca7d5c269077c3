"""torch_npu's AOTInductor entry points for npu models (applied from the patch registry).

aoti_load_package finds the npu runner by the package's device key without help; the older path, a shared
library from torch._inductor.aot_compile loaded with torch._export.aot_load(path, "npu"), goes through
torch._C._aoti.AOTIModelContainerRunnerNpu, which torch_npu adds to torch's AOTI module.
"""

import functools

import torch
import torch.utils._pytree as pytree

from torch_npu import _C


def _is_npu(device):
    return device == "npu" or device.startswith("npu:")


def _call_with_spec(runner, *args, **kwargs):
    from torch.export._tree_utils import reorder_kwargs

    in_spec, out_spec = (pytree.treespec_loads(spec) for spec in runner.get_call_spec())
    flat_inputs = pytree.tree_flatten((args, reorder_kwargs(kwargs, in_spec)))[0]
    outputs = runner.run([x for x in flat_inputs if isinstance(x, torch.Tensor)])
    return pytree.tree_unflatten(outputs, out_spec)


def add_npu_runner():
    """torch._C._aoti.AOTIModelContainerRunnerNpu (torch_npu's name for the npu model runner)."""
    if getattr(torch._C._aoti, "AOTIModelContainerRunnerNpu", None) is _C._aoti.AOTIModelContainerRunnerNpu:
        return False
    torch._C._aoti.AOTIModelContainerRunnerNpu = _C._aoti.AOTIModelContainerRunnerNpu
    return True


def load_npu_models():
    """torch._export.aot_load(so_path, "npu" or "npu:<index>") runs the model with the npu runner."""
    import torch._export as export

    original = export.aot_load
    if getattr(original, "_vnpu_npu_models", False):
        return False

    @functools.wraps(original)
    def aot_load(so_path, device):
        if not _is_npu(device):
            return original(so_path, device)
        runner = _C._aoti.AOTIModelContainerRunnerNpu(so_path, 1, device)
        return functools.partial(_call_with_spec, runner)

    aot_load._vnpu_npu_models = True
    export.aot_load = aot_load
    return True
