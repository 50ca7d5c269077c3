"""matmul_transpose(tensor1, tensor2) = tensor1 @ tensor2^T over the last two dimensions."""

from torch_npu.contrib.function._matmul_transpose import MatmulApply

__all__ = ["matmul_transpose"]

matmul_transpose = MatmulApply.apply
