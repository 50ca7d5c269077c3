"""The autograd function behind SyncBatchNorm on npu (torch_npu.utils.syncbatchnorm.SyncBatchNorm):
per-device batch statistics, combined across the process group, then normalisation."""

from torch.nn.modules._functions import SyncBatchNorm as _TorchSyncBatchNorm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_TorchSyncBatchNorm):
    @staticmethod
    def forward(self, input_tensor, weight, bias, running_mean, running_var, eps, momentum, process_group, world_size):
        return _TorchSyncBatchNorm.forward(
            self, input_tensor, weight, bias, running_mean, running_var, eps, momentum, process_group, world_size
        )

    @staticmethod
    def backward(self, grad_output):
        return _TorchSyncBatchNorm.backward(self, grad_output)
