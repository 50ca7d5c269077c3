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

_npu_silent_check_v2 (aclnnSilentCheck) is the same check with the history packed: ``sfda`` = [pre_val, min_val,
max_val] (float32) and ``step`` (int64, the checks so far, raised by one per call; judged from ``c_min_steps``
on). ``npu_asd_detect`` is the NPU_ASD_ENABLE level: 2 stops at a level-1 fault (the card triggers a resume from
the last checkpoint; vnpu raises, keeping the history as it was), 3 also logs each normal value, 1 logs only.
_npu_silent_check_v3 (aclnnSilentCheckV2) judges ``val`` against a running average instead: with ``step`` = s checks
so far and ``avg`` = a, the bound is a at s = 0 and the Markov-inequality bound a / (1 - betal**s) after; a level 1
fault is inf/NaN or above bound * c_thresh_l1, a level 2 alarm above bound * c_thresh_l2. Unless it stops, the check
then folds a finite ``val`` into the average (a = betal * a + (1 - betal) * val) and raises ``step`` by one. CANN
documents the thresholds and that avg and step are updated; the update itself is the exponential moving average the
bias-corrected bound implies, the same one torch_npu's Python grad-norm detector keeps. npu_asd_detect 2 stops at a
level 1 fault with the gradient zeroed, as the card clears it before resuming. ``max`` is checked (one value) and not
read: CANN gives it no role in the published formula.
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
    value = float(val)
    thresholds = (c_thresh_l1, c_coeff_l1, c_thresh_l2, c_coeff_l2)
    level = _judged(value, (pre_val, min_val, max_val), int(val_counter.max()), c_min_steps, thresholds)
    return torch.full(val_counter.shape, level, dtype=torch.int32, device=val_counter.device)


def _logged(level, value, npu_asd_detect, judged_against):
    """Logs a check's level: a fault or alarm with the (name, value) pairs it was judged against, and at
    npu_asd_detect 3 every normal value. True when npu_asd_detect 2 stops at it (a level-1 fault)."""
    log = get_logger("silent")
    if level != _NORMAL:
        against = ", ".join(f"{name}={v}" for name, v in judged_against)
        log.warning("silent check level %d %s: val=%s, %s", level, "fault" if level == _LEVEL1 else "alarm", value, against)  # fmt: skip
    elif npu_asd_detect == 3:
        log.warning("silent check val=%s", value)
    return level == _LEVEL1 and npu_asd_detect == 2


def _stop(value, op):
    check(False, op, f"silent data corruption: val={value} is a level 1 fault (npu_asd_detect=2: the card stops here and resumes from the last checkpoint)")  # fmt: skip


def _judged(value, history, counter, c_min_steps, thresholds, npu_asd_detect=1, op=_OP):
    """The level of value against history = (pre_val, min_val, max_val) tensors, logged, then the history
    updated in place (not by inf/NaN, which it never keeps); npu_asd_detect 2 raises at a level-1 fault."""
    pre_val, min_val, max_val = history
    level = _level(value, float(pre_val), counter, c_min_steps, thresholds)
    against = (("pre_val", float(pre_val)), ("min_val", float(min_val)), ("max_val", float(max_val)))
    if _logged(level, value, npu_asd_detect, against):
        _stop(value, op)
    if math.isfinite(value):  # the history keeps the last finite values
        with torch.no_grad():
            pre_val.fill_(value)
            min_val.clamp_(max=value)
            max_val.clamp_(min=value)
    return level


@npu_op(
    "_npu_silent_check_v2(Tensor val, Tensor(a!) input_grad, Tensor(b!) sfda, Tensor(c!) step, int c_min_steps, "
    "float c_thresh_l1, float c_coeff_l1, float c_thresh_l2, float c_coeff_l2, int npu_asd_detect) -> Tensor",
    fake=lambda val, input_grad, sfda, step, *args: step.new_empty(step.shape, dtype=torch.int32),
)
def _npu_silent_check_v2(val, input_grad, sfda, step, c_min_steps, c_thresh_l1, c_coeff_l1, c_thresh_l2, c_coeff_l2,
                         npu_asd_detect):  # fmt: skip
    """_npu_silent_check with sfda = [pre_val, min_val, max_val] and step counting the checks (see the module doc)."""
    op = "_npu_silent_check_v2"
    check(val.numel() == 1, op, f"val must hold one value, got shape {tuple(val.shape)}")
    check(sfda.numel() == 3, op, f"sfda must hold [pre_val, min_val, max_val], got shape {tuple(sfda.shape)}")
    thresholds = (c_thresh_l1, c_coeff_l1, c_thresh_l2, c_coeff_l2)
    level = _judged(float(val), sfda.view(-1).unbind(), int(step.max()), c_min_steps, thresholds, npu_asd_detect, op)
    with torch.no_grad():
        step.add_(1)
    return torch.full(step.shape, level, dtype=torch.int32, device=step.device)


@npu_op(
    "_npu_silent_check_v3(Tensor val, Tensor(a!) input_grad, Tensor(b!) step, Tensor(c!) max, Tensor(d!) avg, "
    "float c_thresh_l1, float c_thresh_l2, float betal, int npu_asd_detect) -> Tensor",
    fake=lambda val, input_grad, step, *args: step.new_empty(step.shape, dtype=torch.int32),
)
def _npu_silent_check_v3(val, input_grad, step, max, avg, c_thresh_l1, c_thresh_l2, betal, npu_asd_detect):  # noqa: A002
    """The running-average check (see the module doc)."""
    op = "_npu_silent_check_v3"
    for name, t in (("val", val), ("max", max), ("avg", avg), ("step", step)):
        check(t.numel() == 1, op, f"{name} must hold one value, got shape {tuple(t.shape)}")
    check(step.dtype == torch.int64, op, f"step must be int64, got {step.dtype}")
    check(c_thresh_l1 > c_thresh_l2, op, f"the cThreshL1 value is {c_thresh_l1:f}, cannot be less than or equal to cThreshL2 value {c_thresh_l2:f}.")  # fmt: skip
    check(0 <= betal <= 1, op, f"the beta1 value is {betal:f}, cannot be less than 0 or greater than 1.")
    value, average, steps = float(val), float(avg), int(step)
    correction = 1.0 if steps == 0 else 1.0 - betal**steps
    bound = average / correction if correction > 0 else math.inf
    if not math.isfinite(value) or value > bound * c_thresh_l1:
        level = _LEVEL1
    elif value > bound * c_thresh_l2:
        level = _LEVEL2
    else:
        level = _NORMAL
    stops = _logged(level, value, npu_asd_detect, (("avg", average), ("step", steps)))
    with torch.no_grad():
        if stops:
            input_grad.zero_()  # the card clears the gradient before resuming
            _stop(value, op)
        if math.isfinite(value):
            avg.mul_(betal).add_(value * (1.0 - betal))
        step.add_(1)
    return torch.full(step.shape, level, dtype=torch.int32, device=step.device)
