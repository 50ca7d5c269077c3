"""`torch_npu_run`: torchrun for npu jobs (each worker gets LOCAL_RANK, RANK, WORLD_SIZE and uses npu:LOCAL_RANK
with the hccl backend). As torch_npu's, its agents meet in the `parallel` rendezvous (a ParallelStore on node
0 at --master_addr:--master_port, unless --rdzv_endpoint says otherwise) and it takes
--enable_tiered_parallel_tcpstore (true/false; on vnpu clients reach the store directly either way)."""

import sys

from torch.distributed.argparse_util import env
from torch.distributed.run import get_args_parser
from torch.distributed.run import run as torch_run

__all__ = ["main", "parse_args"]


def parse_args(args):
    parser = get_args_parser()
    parser.add_argument(
        "--enable_tiered_parallel_tcpstore",
        action=env,
        type=str,
        default="false",
        help="Tiered ParallelStore: on Ascend each node's agent proxies its workers' store traffic.",
    )
    return parser.parse_args(args)


def main(args=None):
    import torch_npu  # noqa: F401 (registers the npu device and hccl before workers are configured)
    from torch_npu.distributed.rendezvous import register_elastic

    register_elastic()
    args = parse_args(args)
    args.rdzv_backend = "parallel"
    if not args.rdzv_endpoint:
        args.rdzv_endpoint = f"{args.master_addr}:{args.master_port}"
    settings = [f"rank={args.node_rank}", f"enable_tiered={args.enable_tiered_parallel_tcpstore}"]
    args.rdzv_conf = ",".join(filter(None, [args.rdzv_conf, *settings]))
    return torch_run(args)


if __name__ == "__main__":
    sys.exit(main())
