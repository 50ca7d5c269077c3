"""npu_moe_init_routing_quant: MoE routing with the routed rows quantised to int8 (MoeInitRoutingQuantV2), the
older argument form of npu_moe_init_routing_v2's quantised routing (its routing, capacity and quantisation
rules, which this operator shares):

- quant_mode 0: static, round(x * scale + offset); 1: dynamic, per row max|x * smooth scale| / 127.
- expert_tokens_num_mode (dropless only): 0 none, 1 cumulative counts, 2 counts per expert (int32 [expert_num]).
- expert_tokens_before_capacity_flag (drop/pad only): the routes each expert received before the capacity drop.
- active_num 0: dropless over every route.

Returns (expanded_x int8, expanded_row_idx, expert_token_cumsum_or_count, expert_tokens_before_capacity,
expanded_scale); outputs a mode does not produce are empty tensors.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.moe_init_routing_v2 import npu_moe_init_routing_v2
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_moe_init_routing_quant"


def _options(x, expert_idx, active_num, expert_capacity, expert_num, drop_pad_mode, expert_tokens_num_mode,
             expert_tokens_before_capacity_flag, quant_mode):  # fmt: skip
    check(x.dim() == 2, _OP, f"Input tensor 'x' must be 2-dimensional, but got dimension {x.dim()}")
    check(expert_idx.dim() == 2, _OP, f"Input tensor 'expert_idx' must be 2-dimensional, but got dimension {expert_idx.dim()}")  # fmt: skip
    check(quant_mode in (0, 1), _OP, f"Parameter 'quant_mode' must be 0 or 1, but got: {quant_mode}")
    check(expert_tokens_num_mode in (0, 1, 2), _OP, f"Parameter 'expert_tokens_num_mode' must be 0, 1, or 2, but got: {expert_tokens_num_mode}")  # fmt: skip
    check(drop_pad_mode in (0, 1), _OP, f"Parameter 'drop_pad_mode' must be 0 or 1, but got: {drop_pad_mode}")
    counted = drop_pad_mode == 0 and expert_tokens_num_mode > 0
    before = drop_pad_mode == 1 and expert_tokens_before_capacity_flag
    return counted, before


def _fake(x, expert_idx, *, scale=None, offset=None, active_num=1024, expert_capacity=0, expert_num=256,
          drop_pad_mode=0, expert_tokens_num_mode=0, expert_tokens_before_capacity_flag=False, quant_mode=1):  # fmt: skip
    counted, before = _options(x, expert_idx, active_num, expert_capacity, expert_num, drop_pad_mode,
                               expert_tokens_num_mode, expert_tokens_before_capacity_flag, quant_mode)  # fmt: skip
    routes = expert_idx.numel()
    if drop_pad_mode == 1:
        rows, shape = expert_num * expert_capacity, (expert_num, expert_capacity, x.shape[1])
    else:
        rows = min(routes, active_num) if active_num > 0 else routes
        shape = (rows, x.shape[1])
    empty_int = x.new_empty(0, dtype=torch.int32)
    return (x.new_empty(shape, dtype=torch.int8), expert_idx.new_empty(routes, dtype=torch.int32),
            x.new_empty(expert_num, dtype=torch.int32) if counted else empty_int,
            x.new_empty(expert_num, dtype=torch.int32) if before else empty_int,
            x.new_empty(rows, dtype=torch.float32) if quant_mode == 1 else x.new_empty(0, dtype=torch.float32))  # fmt: skip


@npu_op(
    "npu_moe_init_routing_quant(Tensor x, Tensor expert_idx, *, Tensor? scale=None, Tensor? offset=None, "
    "int active_num=1024, int expert_capacity=0, int expert_num=256, int drop_pad_mode=0, "
    "int expert_tokens_num_mode=0, bool expert_tokens_before_capacity_flag=False, int quant_mode=1) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=_fake,
)
def npu_moe_init_routing_quant(x, expert_idx, *, scale=None, offset=None, active_num=1024, expert_capacity=0,
                               expert_num=256, drop_pad_mode=0, expert_tokens_num_mode=0,
                               expert_tokens_before_capacity_flag=False, quant_mode=1):  # fmt: skip
    """(expanded_x, expanded_row_idx, expert_token_cumsum_or_count, expert_tokens_before_capacity, expanded_scale)."""
    counted, before = _options(x, expert_idx, active_num, expert_capacity, expert_num, drop_pad_mode,
                               expert_tokens_num_mode, expert_tokens_before_capacity_flag, quant_mode)  # fmt: skip
    kind = 0 if expert_tokens_num_mode == 1 or not counted else 1  # v2: 0 cumulative, 1 counts
    expanded_x, row_idx, tokens, expanded_scale = npu_moe_init_routing_v2(
        x, expert_idx, scale=scale, offset=offset, active_num=active_num if active_num > 0 else -1,
        expert_capacity=expert_capacity if drop_pad_mode == 1 else -1, expert_num=expert_num,
        drop_pad_mode=drop_pad_mode, expert_tokens_num_type=1 if before else kind,
        expert_tokens_num_flag=counted or before, quant_mode=quant_mode,
    )  # fmt: skip
    empty_int = x.new_empty(0, dtype=torch.int32)
    tokens = tokens.to(torch.int32)
    return (expanded_x, row_idx, tokens if counted else empty_int, tokens if before else empty_int,
            expanded_scale if quant_mode == 1 else x.new_empty(0, dtype=torch.float32))  # fmt: skip
