"""The demo: seed 003's TinyNet, then a small CNN with AMP, trained on npu:0; the same programs on
the CPU must give the same losses (except under AMP, whose op policy is torch_npu's)."""

import torch
import torch.nn as nn

import torch_npu  # noqa: F401


class TinyNet(nn.Module):  # seed 003, section 4
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)

    def forward(self, x):
        return self.fc(x)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(32, 2),
        )

    def forward(self, x):
        return self.net(x)


def tinynet_losses(device, steps):
    torch.manual_seed(0)
    model = TinyNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    g = torch.Generator().manual_seed(0)  # data drawn on the CPU, so both devices see the same batches
    losses = []
    for _ in range(steps):
        x, y = torch.randn(32, 16, generator=g).to(device), torch.randn(32, 8, generator=g).to(device)
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def cnn_amp_losses(device, steps):
    torch.manual_seed(0)
    model = SmallCNN().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scaler = torch.npu.amp.GradScaler(init_scale=2.0**10)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(steps):
        y = torch.randint(0, 2, (16,), generator=g)
        x = torch.randn(16, 3, 32, 32, generator=g)
        x[:, 0] += (y.float() * 2 - 1)[:, None, None]  # class 1 images are brighter in channel 0
        with torch.npu.amp.autocast(dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x.to(device)).float(), y.to(device))
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


def main(steps: int = 20) -> int:
    device = "npu:0" if torch.npu.is_available() else "cpu"
    props = torch.npu.get_device_properties(0)
    print(
        f"vnpu {torch_npu.__version__} | torch {torch.__version__} | {torch.npu.device_count()} x {props.name} "
        f"({props.total_memory / 2**30:.0f} GiB each) | training on {device}"
    )

    npu_losses = tinynet_losses(device, steps)
    print(f"\n[1/2] TinyNet (seed 003), Adam, {steps} steps")
    for step in range(0, steps, max(1, steps // 5)):
        print(f"  step={step:<3d} loss={npu_losses[step]:.4f}")
    same = npu_losses == tinynet_losses("cpu", steps)
    print(f"  same program on cpu: losses {'bit-identical' if same else 'DIFFER'}")

    amp_losses = cnn_amp_losses(device, steps)
    print(f"\n[2/2] Small CNN, Adam, AMP (bf16 autocast + GradScaler), {steps} steps")
    for step in range(0, steps, max(1, steps // 5)):
        print(f"  step={step:<3d} loss={amp_losses[step]:.4f}")

    stats = torch.npu.memory_stats(0)
    print(
        f"\nmemory on {device}: {stats['allocated_bytes.all.current'] / 2**20:.2f} MiB allocated, "
        f"peak {stats['allocated_bytes.all.peak'] / 2**20:.2f} MiB, "
        f"{stats['reserved_bytes.all.current'] / 2**20:.2f} MiB reserved of {props.total_memory / 2**30:.0f} GiB"
    )
    return 0 if same else 1
