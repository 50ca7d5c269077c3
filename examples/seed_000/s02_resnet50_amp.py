# context: the article imports these earlier
import torch
import torch_npu

from torchvision.models import resnet50

# 原始模型加载
model = resnet50(pretrained=True).float()

# 迁移到NPU
model = model.npu()

# 自动混合精度配置
from torch_npu.contrib import amp
model, optimizer = amp.initialize(model, torch.optim.SGD(model.parameters(), lr=0.1), 
                                 opt_level="O2")

# context: one training step to show the model trains
images = torch.randn(2, 3, 64, 64).npu()
labels = torch.tensor([1, 7]).npu()
loss = torch.nn.functional.cross_entropy(model(images), labels)
optimizer.zero_grad()
with amp.scale_loss(loss, optimizer) as scaled_loss:
    scaled_loss.backward()
optimizer.step()
print(f"loss={loss.item():.4f}")
