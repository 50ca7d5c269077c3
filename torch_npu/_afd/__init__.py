"""torch_npu._afd: Attention-FFN disaggregation (AFD) — the schedule-context holder and the worker-scheduler
operators (torch.ops.npu.ffn_worker_scheduler(_), attention_worker_scheduler(_)). AFD runs on the card (see
torch_npu.ops.card_only): the operators and create_schedule_context_holder raise saying so."""

import torch

from torch_npu.ops.card_only import CARD_ONLY
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = ["create_schedule_context_holder"]

_OPERATORS = (
    "attention_worker_scheduler_",
    "attention_worker_scheduler",
    "ffn_worker_scheduler_",
    "ffn_worker_scheduler",
)


def create_schedule_context_holder(
    schedule_mode: int,
    session_num: int,
    micro_batch_num: int,
    micro_batch_size: int,
    selected_expert_num: int,
    expert_num: int,
    attn_to_ffn_token_size: int,
    ffn_to_attn_token_size: int,
    ffn_window: int = 0,
    ffn_window_size: int = 0,
    attention_window: int = 0,
    attention_window_size: int = 0,
):
    """The holder of an AFD ScheduleContext (a 1024-byte int8 tensor over the attention / FFN windows)."""
    raise RuntimeError(
        "create_schedule_context_holder runs only on an Ascend card: " + CARD_ONLY["ffn_worker_scheduler"] + "."
        + pta_error(ErrCode.NOT_SUPPORT)
    )  # fmt: skip


for _name in _OPERATORS:
    globals()[_name] = getattr(torch.ops.npu, _name)
del _name
