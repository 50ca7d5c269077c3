"""mmengine's Runner training a small ConvNet on the device mmengine picks: npu when torch_npu has devices, the CPU
with --cpu (ASCEND_RT_VISIBLE_DEVICES="", set before torch is imported: mmengine decides at import).

Usage: python mmengine_loop.py --out DIR [--cpu] [RUN ...], each RUN one of RUNS below, trained in order by one
process (mmengine's import costs more than a run). Each run writes DIR/RUN/rank0.json with the device mmengine
chose, its optimizer wrapper's loss scaler, the loss of every iteration and the final parameters.
"""

import argparse
import json
import os
import sys

RUNS = {
    "sgd": dict(type="OptimWrapper", optimizer=dict(type="SGD", lr=0.1, momentum=0.9)),
    "amp_fp16": dict(type="AmpOptimWrapper", dtype="float16", optimizer=dict(type="SGD", lr=0.1, momentum=0.9)),
    "adamw": dict(type="OptimWrapper", optimizer=dict(type="AdamW", lr=1e-2)),
    # torch_npu's fused AdamW, which mmengine registers from torch_npu.optim when it finds npu devices
    "npu_fused_adamw": dict(type="OptimWrapper", optimizer=dict(type="NpuFusedAdamW", lr=1e-2)),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("runs", nargs="*", default=["sgd"])
    args = parser.parse_args()
    if args.cpu:
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = ""
    for run in args.runs:
        train(run, args.out)


def train(run, out_dir):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from mmengine.device import get_device
    from mmengine.hooks import Hook
    from mmengine.model import BaseModel
    from mmengine.runner import Runner
    from torch.utils.data import TensorDataset

    class ConvNet(BaseModel):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.fc = nn.Linear(8, 4)

        def forward(self, x, y, mode="tensor"):
            out = self.fc(F.adaptive_avg_pool2d(F.relu(self.bn(self.conv(x))), 1).flatten(1))
            return {"loss": F.cross_entropy(out.float(), y)} if mode == "loss" else out

    class Losses(Hook):
        def __init__(self):
            self.values = []

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            self.values.append(outputs["loss"].item())

    def collate(batch):
        return {"x": torch.stack([b[0] for b in batch]), "y": torch.stack([b[1] for b in batch])}

    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(32, 3, 8, 8, generator=g), torch.randint(0, 4, (32,), generator=g))
    torch.manual_seed(1)
    losses = Losses()
    runner = Runner(
        model=ConvNet(),
        work_dir=os.path.join(out_dir, run, "work"),
        train_dataloader=dict(
            dataset=data, batch_size=8, sampler=dict(type="DefaultSampler", shuffle=False), collate_fn=collate
        ),
        optim_wrapper=RUNS[run],
        train_cfg=dict(by_epoch=True, max_epochs=2),
        custom_hooks=[losses],
        default_hooks=dict(checkpoint=None),
        randomness=dict(seed=0),
        launcher="none",
    )
    runner.train()
    scaler = getattr(runner.optim_wrapper, "loss_scaler", None)
    with open(os.path.join(out_dir, run, "rank0.json"), "w") as f:
        json.dump(
            {
                "device": get_device(),
                "parameter_device": str(next(runner.model.parameters()).device),
                "scaler": None if scaler is None else f"{type(scaler).__module__}.{type(scaler).__name__}",
                "losses": losses.values,
                "params": [p.detach().float().cpu().flatten().tolist() for p in runner.model.parameters()],
                "buffers": [b.detach().float().cpu().flatten().tolist() for b in runner.model.buffers()],
            },
            f,
        )


if __name__ == "__main__":
    sys.exit(main())
