"""The hccl backend's silent-data-corruption check on what each rank sends (NPU_ASD_ENABLE), one rank's side.

The card judges a collective's input once it has seen 100 collectives of that kind (the history), so each case
first runs 100 ordinary all_reduces in the backward call state, then one whose every element is 1e7 — a norm
above the default level-1 threshold (1e6): a level-1 fault."""

import logging

import torch
import torch.distributed as dist
from distributed_rank import DEV, WORLD, same

import torch_npu

_HISTORY = 100
_SPIKE = 1e7


class _Faults(logging.Handler):
    """Counts the faults the check logs on torch_npu.silent."""

    def __init__(self):
        super().__init__()
        self.count = 0
        logging.getLogger("torch_npu.silent").addHandler(self)

    def emit(self, record):
        self.count += "fault" in record.getMessage()


def _all_reduce(value, n=8):
    t = torch.full((n,), value, device=DEV)
    dist.all_reduce(t)
    same(t, torch.full((n,), value * WORLD))


def _build_history():
    torch_npu._C._npu_set_module_train_state("train")
    torch_npu._C._npu_set_call_state("backward")
    for step in range(_HISTORY):
        _all_reduce(1.0 + step / _HISTORY)


def case_silent_check_logs_faults():
    """NPU_ASD_ENABLE=1: only training's backward collectives (and sends) are judged; a fault is logged and the
    collective still delivers its exact result."""
    faults = _Faults()
    torch_npu._C._npu_set_module_train_state("infer")
    torch_npu._C._npu_set_call_state("backward")
    for _ in range(_HISTORY + 1):  # inference: never judged, however often
        _all_reduce(_SPIKE)
    assert faults.count == 0, faults.count
    _build_history()
    torch_npu._C._npu_set_call_state("forward")
    _all_reduce(_SPIKE)  # a forward collective is not judged
    dist.broadcast(torch.full((4,), _SPIKE, device=DEV), src=0)
    assert faults.count == 0, faults.count
    torch_npu._C._npu_set_call_state("backward")
    _all_reduce(_SPIKE, n=1)  # one element: a barrier's allreduce, never judged
    assert faults.count == 0, faults.count
    _all_reduce(_SPIKE)
    assert faults.count == 1, faults.count
    _all_reduce(2.0)  # normal again
    assert faults.count == 1, faults.count


def case_silent_check_stops_at_a_fault():
    """NPU_ASD_ENABLE=2: a level-1 fault stops the collective on the rank that would send it (the card resumes from
    the last checkpoint); the group's history is kept and the next collectives run."""
    _build_history()
    t = torch.full((8,), _SPIKE, device=DEV)
    try:
        dist.all_reduce(t)
        raise AssertionError("the fault went unnoticed")
    except RuntimeError as err:
        assert "silent data corruption: val=" in str(err) and "is a level 1 fault" in str(err), str(err)
    same(t, torch.full((8,), _SPIKE))  # not reduced: nothing was sent
    _all_reduce(2.0)
