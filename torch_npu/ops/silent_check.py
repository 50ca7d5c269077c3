"""_npu_silent_check: one step of silent-data-corruption detection on a gradient (SilentCheck on the card).

``val`` is a feature of the gradient (its norm); ``pre_val`` / ``min_val`` / ``max_val`` are the detector's
history for that gradient (previous value, smallest and largest seen) and are updated in place. Once
``val_counter`` has reached ``c_min_steps`` the value is judged:

- level 1 fault: ``val`` is inf/NaN, above ``c_thresh_l1``, or jumped more than ``c_coeff_l1`` times the
  previous value;
- level 2 alarm: above ``c_thresh_l2`` or a jump of more than ``c_coeff_l2`` times the previous value.

The result (int32, shaped like ``val_counter``) is 0, 1 or 2; faults and alarms are logged on the
``torch_npu.silent`` logger (TORCH_NPU_LOGS=silent), as the card only logs them at the default level. The
jump is ``val / pre_val`` against the previous check — CANN documents "a jump beyond the relative threshold"
without its formula; this is vnpu's reading of it.
"""

import math

import torch

from torch_npu._logging import get_logger
from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "_npu_silent_check"
_NORMAL, _LEVEL1, _LEVEL2 = 0, 1, 2


def _level(val, pre, counter, c_min_steps, thresholds):
    thresh_l1, coeff_l1, thresh_l2, coeff_l2 = thresholds
    if counter < c_min_steps:
        return _NORMAL
    jump = val / pre if pre > 0 else 0.0
    if not math.isfinite(val) or val > thresh_l1 or jump > coeff_l1:
        return _LEVEL1
    if val > thresh_l2 or jump > coeff_l2:
        return _LEVEL2
    return _NORMAL


@npu_op(
    "_npu_silent_check(Tensor(a!) input_grad, Tensor val, Tensor(b!) pre_val, Tensor(c!) min_val, "
    "Tensor(d!) max_val, Tensor val_counter, int c_min_steps, float c_thresh_l1, float c_coeff_l1, "
    "float c_thresh_l2, float c_coeff_l2) -> Tensor",
    fake=lambda input_grad, val, pre_val, min_val, max_val, val_counter, *args: val_counter.new_empty(
        val_counter.shape, dtype=torch.int32
    ),
)
def _npu_silent_check(
    input_grad, val, pre_val, min_val, max_val, val_counter, c_min_steps, c_thresh_l1, c_coeff_l1, c_thresh_l2,
    c_coeff_l2,
):  # fmt: skip
    for name, t in (("val", val), ("pre_val", pre_val), ("min_val", min_val), ("max_val", max_val)):
        check(t.numel() == 1, _OP, f"{name} must hold one value, got shape {tuple(t.shape)}")
    value, previous = float(val), float(pre_val)
    level = _level(
        value, previous, int(val_counter.max()), c_min_steps, (c_thresh_l1, c_coeff_l1, c_thresh_l2, c_coeff_l2)
    )
    if level != _NORMAL:
        get_logger("silent").warning(
            "silent check level %d %s: val=%s, pre_val=%s, min_val=%s, max_val=%s",
            level,
            "fault" if level == _LEVEL1 else "alarm",
            value,
            previous,
            float(min_val),
            float(max_val),
        )
    if not math.isfinite(value):  # the history keeps the last finite values
        return torch.full(val_counter.shape, level, dtype=torch.int32, device=val_counter.device)
    with torch.no_grad():
        pre_val.fill_(value)
        min_val.clamp_(max=value)
        max_val.clamp_(min=value)
    return torch.full(val_counter.shape, level, dtype=torch.int32, device=val_counter.device)
