"""MatmulApply: tensor1 @ tensor2^T over the last two dimensions, with its backward as two matmuls."""

import torch

__all__ = []


class MatmulApply(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor1, tensor2):
        ctx.save_for_backward(tensor1, tensor2)
        return torch.matmul(tensor1, tensor2.transpose(-2, -1))

    @staticmethod
    def backward(ctx, grad):
        tensor1, tensor2 = ctx.saved_tensors
        return torch.matmul(grad, tensor2), torch.matmul(grad.transpose(-2, -1), tensor1)
