"""DeepSpeed ZeRO training, as its users run it (`deepspeed --num_gpus N deepspeed_loop.py ...`).

Usage: deepspeed_loop.py --out DIR RUN [RUN ...]
where each RUN is `ddp` (plain torch DistributedDataParallel: the reference numbers) or
`zero<stage>-<fp32|bf16|fp16>[-offload]` (ZeRO with the optimizer state offloaded to the CPU).
The runs share one launch (DeepSpeed's import dominates a short run). With DS_ACCELERATOR=cpu the
same program runs on the CPU (gloo). Each process writes DIR/rank<N>.json: per run the accelerator,
device, optimizer class, losses and final parameters (float32).
"""

import argparse
import json
import os

import deepspeed
import torch
import torch.nn as nn
import torch.nn.functional as F
from deepspeed.accelerator import get_accelerator


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(4, 8, generator=g)
    return x, (x[:, :4].sum(dim=1) > 0).long() + 2 * (x[:, 4:].sum(dim=1) > 0).long()


def train(run, device, rank, steps=6):
    model = net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False)
    precision = "fp32"
    if run == "ddp":
        engine = torch.nn.parallel.DistributedDataParallel(model.to(device))
    else:
        stage, precision, *rest = run[len("zero") :].split("-")
        config = {
            "train_micro_batch_size_per_gpu": 4,
            "gradient_accumulation_steps": 1,
            "steps_per_print": 1000,
            "zero_optimization": {"stage": int(stage)},
            "bf16": {"enabled": precision == "bf16"},
            "fp16": {"enabled": precision == "fp16", "initial_scale_power": 8},
        }
        if rest == ["offload"]:
            config["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
            config["zero_force_ds_cpu_optimizer"] = False  # torch's AdamW: no compiled CPU Adam needed
        engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
        device = engine.device
    losses = []
    for step in range(steps):
        x, y = batch(step, rank)
        x = x.to(device)
        if precision != "fp32":
            x = x.to(torch.bfloat16 if precision == "bf16" else torch.float16)
        loss = F.cross_entropy(engine(x).float(), y.to(device))
        if run == "ddp":
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        else:
            engine.backward(loss)
            engine.step()
        losses.append(loss.item())
    parameters = list(engine.module.parameters())
    if run.startswith("zero3"):
        with deepspeed.zero.GatheredParameters(parameters):
            params = [p.detach().float().cpu().flatten().tolist() for p in parameters]
    else:
        params = [p.detach().float().cpu().flatten().tolist() for p in parameters]
    return {"device": str(device), "optimizer": type(optimizer).__name__, "losses": losses, "params": params}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--local_rank", type=int, default=0)  # passed by the deepspeed launcher
    args = parser.parse_args()

    accelerator = get_accelerator()
    on_cpu = accelerator.device_name() == "cpu"
    deepspeed.init_distributed(dist_backend="gloo" if on_cpu else None)
    rank = torch.distributed.get_rank()
    device = torch.device("cpu") if on_cpu else torch.device(accelerator.device_name(), args.local_rank)
    result = {
        "accelerator": accelerator.device_name(),
        "backend": torch.distributed.get_backend(),
        "world_size": torch.distributed.get_world_size(),
        "runs": {},
    }
    for run in args.runs:
        result["runs"][run] = train(run, device, rank)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
