"""Small models and a training loop shared by the torch.compile tests."""

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_npu


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


class DropoutMLP(MLP):
    """MLP with dropout between its layers: compiled code draws the masks."""

    def __init__(self):
        super().__init__()
        self.net.insert(3, nn.Dropout(0.3))


class FeatureDropoutMLP(MLP):
    """MLP with feature dropout (ATen's Bernoulli noise, not native_dropout): whole rows dropped."""

    def __init__(self):
        super().__init__()
        self.net.insert(3, nn.Dropout1d(0.3))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(8, 4),
        )

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    """A transformer block: rms_norm, rotary embedding and SDPA, through plain PyTorch or (on npu)
    through torch_npu's npu_rms_norm / npu_rotary_mul."""

    def __init__(self, npu_ops=False, d=32, heads=4):
        super().__init__()
        self.npu_ops, self.heads = npu_ops, heads
        self.norm = nn.Parameter(torch.ones(d))
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))

    def rms_norm(self, x):
        if self.npu_ops:
            return torch_npu.npu_rms_norm(x, self.norm)[0]
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm

    def rotary(self, x, cos, sin):
        if self.npu_ops:
            return torch_npu.npu_rotary_mul(x, cos, sin)
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def forward(self, x):
        b, t, d = x.shape
        angle = torch.arange(t, device=x.device, dtype=x.dtype)[:, None] * torch.linspace(
            0.1, 1.0, d // self.heads, device=x.device, dtype=x.dtype
        )
        cos, sin = angle.cos()[None, None], angle.sin()[None, None]
        q, k, v = self.qkv(self.rms_norm(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = self.rotary(q, cos, sin), self.rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.rms_norm(x))


def batch_for(make, step):
    g = torch.Generator().manual_seed(step)
    if make is CNN:
        return torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 4, (4,), generator=g)
    if issubclass(make, MLP):
        return torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
    return torch.randn(2, 8, 32, generator=g), torch.randn(2, 8, 32, generator=g)


def train(make, device, *, compile_kwargs=None, steps=3, amp_dtype=None, **model_kwargs):
    """Losses and final parameters of `steps` SGD steps; compile_kwargs=None trains eagerly. (SGD, not Adam:
    Adam turns the rounding noise of a zero gradient, such as a bias before BatchNorm, into full steps.)"""
    torch.manual_seed(0)
    model = make(**model_kwargs).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    run = torch.compile(model, **compile_kwargs) if compile_kwargs is not None else model
    losses = []
    for step in range(steps):
        x, y = (t.to(device) for t in batch_for(make, step))
        with torch.autocast(device.split(":")[0], dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            out = run(x)
            loss = F.cross_entropy(out.float(), y) if y.dtype == torch.long else F.mse_loss(out.float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def replay_model_and_input():
    """An inference model of many small operators (where graph replay saves host time) and an input."""
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [nn.Linear(16, 16), nn.LayerNorm(16), nn.GELU()]
    return nn.Sequential(*layers).npu().eval(), torch.randn(4, 16, device="npu")
