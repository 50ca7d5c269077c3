"""torch_npu.jit: TorchScript graph rewrites torch_npu applies for inference on the card."""

from .register_fusion_pattern import optimize

__all__ = ["optimize"]
