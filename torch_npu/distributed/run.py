"""`torch_npu_run`: torchrun for npu jobs (the same arguments; each worker gets LOCAL_RANK, RANK, WORLD_SIZE
and uses npu:LOCAL_RANK with the hccl backend)."""

import sys

from torch.distributed.run import main as torchrun_main
from torch.distributed.run import parse_args

__all__ = ["main", "parse_args"]


def main(args=None):
    import torch_npu  # noqa: F401 (registers the npu device and hccl before workers are configured)

    return torchrun_main(args)


if __name__ == "__main__":
    sys.exit(main())
