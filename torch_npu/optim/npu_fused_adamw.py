"""NpuFusedAdamW: torch.optim.AdamW's update (decoupled weight decay) on combined buffers."""

from torch_npu.optim.npu_fused_adam import NpuFusedAdam

__all__ = ["NpuFusedAdamW"]


class NpuFusedAdamW(NpuFusedAdam):
    """AdamW, equal to torch.optim.AdamW."""

    _decoupled_weight_decay = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
