"""Started by torchrun / torch_npu_run in tests/test_distributed.py: npu:LOCAL_RANK, hccl, one all_reduce."""

import os

import torch
import torch.distributed as dist

import torch_npu  # noqa: F401

local = int(os.environ["LOCAL_RANK"])
torch.npu.set_device(local)
dist.init_process_group("hccl")
t = torch.full((2,), float(dist.get_rank() + 1), device=f"npu:{local}")
dist.all_reduce(t)
print(f"rank {dist.get_rank()}/{dist.get_world_size()} device {t.device} sum {t[0].item()}", flush=True)
dist.destroy_process_group()
