"""Whole training loops: seed 003's TinyNet runs as written and is reproducible; with data drawn
on the CPU, TinyNet and a small CNN give npu losses equal to CPU losses at every step."""

import contextlib
import io
import os
import runpy

import pytest
import torch
import torch.nn as nn

from vnpu.demo import TinyNet

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "seed_003_tinynet.py")


def run_seed_example(seed):
    torch.manual_seed(seed)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        namespace = runpy.run_path(EXAMPLE)
    return out.getvalue(), namespace


def test_seed_003_example_runs_on_npu_and_is_reproducible():
    first, namespace = run_seed_example(0)
    second, _ = run_seed_example(0)
    assert namespace["device"] == "npu:0"
    assert next(namespace["model"].parameters()).device == torch.device("npu", 0)
    lines = first.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["step=0", "step=5"]
    assert first == second
    third, _ = run_seed_example(1)
    assert third != first


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(16, 10))

    def forward(self, x):
        return self.head(self.features(x))


def train(make_model, make_batch, device, steps, optimizer="adam", amp=False):
    torch.manual_seed(0)
    model = make_model().to(device)
    opt = (
        torch.optim.Adam(model.parameters(), lr=1e-3)
        if optimizer == "adam"
        else torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    )
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x, y = make_batch(g)
        x, y = x.to(device), y.to(device)
        torch.manual_seed(len(losses))  # dropout masks: the same seed on both devices
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=amp):
            out = model(x)
            loss = (
                nn.functional.cross_entropy(out.float(), y)
                if y.dtype == torch.long
                else nn.functional.mse_loss(out.float(), y)
            )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def tiny_batch(g):
    return torch.randn(32, 16, generator=g), torch.randn(32, 8, generator=g)


def cnn_batch(g):
    return torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g)


@pytest.mark.parametrize(
    "name,make_model,make_batch,optimizer,amp",
    [
        ("tinynet", TinyNet, tiny_batch, "adam", False),
        ("cnn", SmallCNN, cnn_batch, "sgd", False),
        ("cnn-adam", SmallCNN, cnn_batch, "adam", False),
    ],
)
def test_npu_losses_equal_cpu_losses_step_for_step(name, make_model, make_batch, optimizer, amp):
    npu_losses, npu_params = train(make_model, make_batch, "npu:0", 8, optimizer, amp)
    cpu_losses, cpu_params = train(make_model, make_batch, "cpu", 8, optimizer, amp)
    assert npu_losses == cpu_losses
    assert all(torch.equal(a, b) for a, b in zip(npu_params, cpu_params))


def test_amp_training_is_reproducible_and_learns():
    # Autocast policies differ between devices (torch_npu's lists are not the CPU's), so AMP runs
    # are compared with themselves; the per-op policy is tested in test_amp.py.
    def learnable_batch(g):
        x = torch.randn(8, 3, 16, 16, generator=g)
        return x, (x.mean(dim=(1, 2, 3)) > 0).long()

    first, _ = train(SmallCNN, learnable_batch, "npu:0", 30, "adam", amp=True)
    second, _ = train(SmallCNN, learnable_batch, "npu:0", 30, "adam", amp=True)
    assert first == second
    assert sum(first[-5:]) < sum(first[:5])
