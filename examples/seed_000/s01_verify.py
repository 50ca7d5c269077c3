import torch
import torch_npu

# 检查NPU设备识别
device = torch.device("npu:0" if torch_npu.npu.is_available() else "cpu")
print(f"Using device: {device}")

# 基础张量运算测试
x = torch.randn(2, 3).npu()
y = torch.randn(3, 2).npu()
z = torch.mm(x, y)
print(z.cpu())
