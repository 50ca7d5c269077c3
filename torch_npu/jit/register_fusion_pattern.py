"""torch_npu.jit.optimize: the fusion passes, applied in place to a TorchScript function or module."""

import torch

from .fusion_pass.fast_gelu import fast_gelu_pass


def optimize(jit_mod):
    """Applies torch_npu's fusion passes to `jit_mod`'s graph in place. A ScriptModule goes through
    torch.jit.optimize_for_inference first, as torch_npu does (that call freezes a copy it returns and puts
    the module itself in eval mode)."""
    if isinstance(jit_mod, torch.jit.ScriptModule):
        torch.jit.optimize_for_inference(jit_mod)
    fast_gelu_pass(jit_mod)
