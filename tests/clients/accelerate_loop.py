"""accelerate's documented training loop: the optimizer is built before `prepare` moves the model.

Usage: python accelerate_loop.py --out DIR [--cpu] [--save DIR] [--resume DIR] MIXED_PRECISION [...]
(also under `accelerate launch` / torchrun). Each mixed precision is one run, in order, in the same
process (accelerate's import costs more than a run); each process writes DIR/MIXED_PRECISION/rank<N>.json:
its device, the distributed type, the losses of every step and the final parameters.

`python accelerate_loop.py --plain-cpu --out DIR fp16` runs the same loop written in plain PyTorch on the
CPU (autocast + GradScaler, the loss divided over the accumulation steps): accelerate itself does not
use fp16 on the CPU, so this is the CPU program an fp16 run on npu must reproduce.
"""

import argparse
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import set_seed


class Net(nn.Module):
    # Linear layers and a loss on float32 logits: autocast gives these the same dtypes on cpu and npu.
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.body(x)


def batches():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=g)
    y = (x[:, :4].sum(dim=1) > 0).long() + 2 * (x[:, 4:].sum(dim=1) > 0).long()
    return torch.utils.data.TensorDataset(x, y)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--save")
    parser.add_argument("--resume")
    parser.add_argument("--out", required=True)
    parser.add_argument("--plain-cpu", action="store_true")
    parser.add_argument("mixed_precision", nargs="+", choices=["no", "fp16", "bf16"])
    args = parser.parse_args()
    accelerator = None
    for mixed_precision in args.mixed_precision:
        out = os.path.join(args.out, mixed_precision)
        if args.plain_cpu:
            plain_loop(args, mixed_precision, out)
        else:
            accelerator = accelerate_loop(args, mixed_precision, out)
    if accelerator is not None:
        accelerator.end_training()


def accelerate_loop(args, mixed_precision, out):
    # accelerate keeps one AcceleratorState and GradientState per process: each run starts from new ones, as in a
    # new process (the process group and the device, in PartialState, stay).
    AcceleratorState._reset_state()
    GradientState._reset_state()
    accelerator = Accelerator(mixed_precision=mixed_precision, cpu=args.cpu, gradient_accumulation_steps=2)
    set_seed(0)
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loader = torch.utils.data.DataLoader(batches(), batch_size=8, shuffle=False)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    if args.resume:
        accelerator.load_state(args.resume)
    losses = []
    for _ in range(args.epochs):
        for x, y in loader:
            with accelerator.accumulate(model):
                loss = F.cross_entropy(model(x).float(), y)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            losses.append(loss.item())
    if args.save:
        accelerator.save_state(args.save)
    params = [p.detach().float().cpu().flatten().tolist() for p in accelerator.unwrap_model(model).parameters()]
    write(
        out,
        accelerator.process_index,
        {
            "rank": accelerator.process_index,
            "device": str(accelerator.device),
            "distributed_type": str(accelerator.distributed_type),
            "param_device": str(next(model.parameters()).device),
            "scaler": type(accelerator.scaler).__module__ + "." + type(accelerator.scaler).__name__
            if accelerator.scaler is not None
            else None,
            "losses": losses,
            "params": params,
        },
    )
    return accelerator


def plain_loop(args, mixed_precision, out):
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loader = torch.utils.data.DataLoader(batches(), batch_size=8, shuffle=False)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[mixed_precision]
    scaler = torch.amp.GradScaler("cpu", enabled=dtype == torch.float16)
    losses = []
    for _ in range(args.epochs):
        for step, (x, y) in enumerate(loader, start=1):
            with torch.autocast("cpu", dtype=dtype):
                loss = F.cross_entropy(model(x).float(), y)
            scaler.scale(loss / 2).backward()
            if step % 2 == 0 or step == len(loader):
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
            losses.append(loss.item())
    params = [p.detach().float().flatten().tolist() for p in model.parameters()]
    write(out, 0, {"device": "cpu", "losses": losses, "params": params})


def write(directory, rank, result):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
