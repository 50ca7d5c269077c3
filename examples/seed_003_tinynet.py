# Seed document 003, section 4 ("最小迁移：一个完整的训练示例"), exactly as written there.
import torch
import torch.nn as nn
import torch_npu  # 关键：引入后 torch 才能识别 npu 设备

device = 'npu:0' if torch.npu.is_available() else 'cpu'

class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)

    def forward(self, x):
        return self.fc(x)

model = TinyNet().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.MSELoss()

for step in range(10):
    x = torch.randn(32, 16, device=device)   # 直接在 npu 上建张量
    y = torch.randn(32, 8, device=device)
    pred = model(x)
    loss = loss_fn(pred, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 5 == 0:
        print(f"step={step} loss={loss.item():.4f}")
