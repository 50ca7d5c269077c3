"""torch.npu.amp: autocast and GradScaler for the npu device."""

from torch_npu.npu.amp import common  # noqa: F401  (torch.npu.amp.common, as torch.cuda.amp.common)
from torch_npu.npu.amp.autocast_mode import autocast, custom_bwd, custom_fwd
from torch_npu.npu.amp.grad_scaler import GradScaler

__all__ = ["autocast", "custom_fwd", "custom_bwd", "GradScaler"]
