# context
import torch
import torch_npu

model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU())

from torch_npu.nn import SyncBatchNorm

# 替换原始BatchNorm
model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
model = model.npu()

# context: inference with the converted model
model.eval()
print(type(model[1]).__name__, tuple(model(torch.randn(2, 3, 8, 8).npu()).shape))
