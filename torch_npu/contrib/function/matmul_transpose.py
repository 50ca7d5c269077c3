"""matmul_transpose(tensor1, tensor2) = tensor1 @ tensor2^T over the last two dimensions."""

import torch

__all__ = ["matmul_transpose"]


class _MatmulTranspose(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor1, tensor2):
        ctx.save_for_backward(tensor1, tensor2)
        return torch.matmul(tensor1, tensor2.transpose(-2, -1))

    @staticmethod
    def backward(ctx, grad):
        tensor1, tensor2 = ctx.saved_tensors
        return torch.matmul(grad, tensor2), torch.matmul(grad.transpose(-2, -1), tensor1)


matmul_transpose = _MatmulTranspose.apply
