"""npu_moe_distribute_dispatch / _combine: what vnpu does not compute is refused before any communication, with
the argument named (the multi-rank behaviour is in test_distributed.py)."""

import torch

import torch_npu
from tests.error_cases import raises_operator_error


def test_refusals_name_the_argument():
    x, ids = torch.randn(2, 8).npu(), torch.zeros(2, 1, dtype=torch.int32).npu()
    raises_operator_error(
        lambda: torch_npu.npu_moe_distribute_dispatch(x, ids, "hccl_0", 2, 0, 4, tp_world_size=2),
        "npu_moe_distribute_dispatch: tp_world_size=2: the TP domain is not computed by vnpu",
    )
    raises_operator_error(
        lambda: torch_npu.npu_moe_distribute_dispatch_v2(x, ids, "hccl_0", 2, 0, 4, shared_expert_rank_num=1),
        "npu_moe_distribute_dispatch_v2: shared-expert ranks (shared_expert_rank_num > 0) are not computed by vnpu",
    )
    raises_operator_error(
        lambda: torch_npu.npu_moe_distribute_combine(
            x, ids, ids.reshape(-1), ids.reshape(-1), torch.ones(2, 1).npu(), "hccl_0", 2, 0, 4, comm_quant_mode=2
        ),  # fmt: skip
        "npu_moe_distribute_combine: comm_quant_mode is not computed by vnpu",
    )
