"""Gradient silent-data-corruption detection: the _npu_silent_check operator (levels, history), the detector
behind torch_npu.utils.set_asd_loss_scale / register_asd_hook, and NPU_ASD_ENABLE's layer-norm hook."""

import logging
import math

import pytest
import torch
from error_cases import raises_exactly
from subprocess_helpers import run_python

import torch_npu

THRESHOLDS = (1e6, 1e5, 1e4, 5e3)  # level 1 absolute / jump, level 2 absolute / jump


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def silent_log():
    handler, logger = _Records(), logging.getLogger("torch_npu.silent")
    logger.addHandler(handler)
    yield handler.messages
    logger.removeHandler(handler)


def _history():
    return [torch.tensor(v).npu() for v in (0.0, 1e10, -1e10)]


def _check(value, history, counter=7, min_steps=7):
    grad = torch.ones(3).npu()
    step = torch.tensor(counter, dtype=torch.int32).npu()
    out = torch_npu._npu_silent_check(grad, torch.tensor(value).npu(), *history, step, min_steps, *THRESHOLDS)
    assert torch.equal(grad.cpu(), torch.ones(3))  # the gradient is only read
    return int(out), [float(t) for t in history]


def test_levels_and_history(silent_log):
    history = _history()
    assert _check(1.0, history) == (0, [1.0, 1.0, 1.0])
    assert _check(2.0, history) == (0, [2.0, 1.0, 2.0])
    assert _check(20000.0, history) == (2, [20000.0, 1.0, 20000.0])  # above level 2's absolute threshold
    assert _check(2e6, history) == (1, [2e6, 1.0, 2e6])  # above level 1's
    assert _check(1.0, history)[0] == 0
    assert _check(6000.0, history)[0] == 2  # a jump of 6000x the previous value
    assert _check(float("nan"), history) == (1, [6000.0, 1.0, 2e6])  # inf/NaN: level 1, history kept
    assert [m.split(":")[0] for m in silent_log] == [
        "silent check level 2 alarm",
        "silent check level 1 fault",
        "silent check level 2 alarm",
        "silent check level 1 fault",
    ]


def test_nothing_is_judged_before_min_steps():
    history = _history()
    assert _check(float("inf"), history, counter=0) == (0, [0.0, 1e10, -1e10])
    assert _check(5e6, history, counter=6)[0] == 0


def test_fake_kernel_and_bad_input():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        t = torch.empty(4, device="npu")
        scalars = [torch.empty((), device="npu") for _ in range(4)]
        out = torch_npu._npu_silent_check(t, *scalars, torch.empty(1, dtype=torch.int32, device="npu"), 7, *THRESHOLDS)
    assert out.shape == (1,) and out.dtype == torch.int32
    with pytest.raises(RuntimeError) as info:
        _check_with_vector_val()
    assert str(info.value).splitlines()[0] == "_npu_silent_check: val must hold one value, got shape (2,)"


def _check_with_vector_val():
    step = torch.tensor(7, dtype=torch.int32).npu()
    return torch_npu._npu_silent_check(torch.ones(2).npu(), torch.ones(2).npu(), *_history(), step, 7, *THRESHOLDS)


def _check_v2(value, sfda, step, npu_asd_detect=1):
    grad = torch.ones(3).npu()
    out = torch_npu._npu_silent_check_v2(torch.tensor(value).npu(), grad, sfda, step, 7, *THRESHOLDS, npu_asd_detect)
    assert torch.equal(grad.cpu(), torch.ones(3)) and out.dtype == torch.int32
    return int(out), sfda.cpu().tolist(), int(step)


def test_v2_packs_the_history_and_counts_its_steps(silent_log):
    sfda, step = torch.tensor([0.0, 1e10, -1e10]).npu(), torch.tensor([6]).npu()
    assert _check_v2(5e6, sfda, step) == (0, [5e6, 5e6, 5e6], 7)  # step 6 < c_min_steps: not judged
    assert _check_v2(1.0, sfda, step) == (0, [1.0, 1.0, 5e6], 8)
    assert _check_v2(20000.0, sfda, step) == (2, [20000.0, 1.0, 5e6], 9)
    assert _check_v2(float("inf"), sfda, step) == (1, [20000.0, 1.0, 5e6], 10)  # history kept
    assert _check_v2(2.0, sfda, step, npu_asd_detect=3) == (0, [2.0, 1.0, 5e6], 11)
    assert silent_log[-1] == "silent check val=2.0"  # level 3 logs every value
    with pytest.raises(RuntimeError) as info:  # level 2 stops at a fault
        _check_v2(2e6, sfda, step, npu_asd_detect=2)
    assert str(info.value).splitlines()[0] == (
        "_npu_silent_check_v2: silent data corruption: val=2000000.0 is a level 1 fault (npu_asd_detect=2: the card "
        "stops here and resumes from the last checkpoint)"
    )
    assert (sfda.cpu().tolist(), int(step)) == ([2.0, 1.0, 5e6], 11)
    grad, val = torch.ones(3).npu(), torch.tensor(1.0).npu()
    for args, message in (
        ((val, grad, sfda[:2], step), "sfda must hold [pre_val, min_val, max_val], got shape (2,)"),
        ((torch.ones(2).npu(), grad, sfda, step), "val must hold one value, got shape (2,)"),
    ):
        with pytest.raises(RuntimeError) as info:
            torch_npu._npu_silent_check_v2(*args, 7, *THRESHOLDS, 1)
        assert str(info.value).splitlines()[0] == f"_npu_silent_check_v2: {message}"


def test_loss_scale_zero_is_refused():
    raises_exactly(lambda: torch_npu.utils.set_asd_loss_scale(0), ValueError, "loss scale cannot be 0.")
    from torch_npu.utils import asd_detector

    assert torch_npu.utils.set_asd_loss_scale is asd_detector.set_asd_loss_scale
    assert torch_npu.utils.register_asd_hook is asd_detector.register_asd_hook


def test_a_hooked_gradient_that_jumps_is_reported(silent_log):
    from torch_npu.asd import asd

    asd.detector.__init__()  # a fresh history for this test
    weight = torch.nn.Parameter(torch.ones(4).npu())
    for step in range(20):  # the first 16 rounds (7 per weight, plus one) only build the history
        x = torch.ones(4).npu().requires_grad_(True)
        torch_npu.utils.register_asd_hook(x, weight)
        scale = 1e7 if step == 19 else 1.0
        (x * weight * scale).sum().backward()
    assert len(silent_log) == 1 and silent_log[0].startswith("silent check level 1 fault: val=20000000.0, pre_val=2.0")
    assert math.isclose(float(asd.detector.histories[id(weight)].pre_val), 2e7)


def test_float16_gradients_wait_for_the_loss_scale(silent_log):
    from torch_npu.asd import asd

    asd.detector.__init__()
    x = torch.ones(4, dtype=torch.float16).npu().requires_grad_(True)
    torch_npu.utils.register_asd_hook(x, x)
    x.sum().backward()
    assert asd.detector.histories == {}
    torch_npu.utils.set_asd_loss_scale(1024.0)
    y = torch.ones(4, dtype=torch.float16).npu().requires_grad_(True)
    torch_npu.utils.register_asd_hook(y, y)
    (y * 1024).sum().backward()
    assert float(asd.detector.histories[id(y)].pre_val) == 2.0  # norm of the unscaled gradient [1, 1, 1, 1]


def test_npu_asd_enable_hooks_layer_norm_inputs():
    proc = run_python(
        """
        import torch, torch_npu
        import torch.nn.functional as F
        from torch_npu.asd import asd
        ln = torch.nn.LayerNorm(8).npu()
        x = torch.randn(2, 8).npu().requires_grad_(True)
        ln(x).sum().backward()
        print(F.layer_norm.__vnpu_asd__, list(asd.detector.histories) == [id(ln.weight)])
        """,
        env={"NPU_ASD_ENABLE": "1"},
    )
    assert proc.stdout.split() == ["True", "True"]
    plain = run_python("import torch_npu, torch.nn.functional as F; print(hasattr(F.layer_norm, '__vnpu_asd__'))")
    assert plain.stdout.split() == ["False"]


def _check_v3(value, avg, step, npu_asd_detect=1, grad=None, thresholds=(1e6, 1e4), betal=0.5):
    grad = torch.ones(3).npu() if grad is None else grad
    most = torch.tensor([400.0]).npu()
    out = torch_npu._npu_silent_check_v3(torch.tensor([value]).npu(), grad, step, most, avg, *thresholds, betal,
                                         npu_asd_detect)  # fmt: skip
    assert out.dtype == torch.int32 and out.shape == step.shape and float(most) == 400.0
    return int(out), float(avg), int(step)


def _ema(avg, value, betal=0.5):
    """The float32 running average after one finite value."""
    return float(torch.tensor([avg]).mul(betal).add(value * (1 - betal)))


def test_v3_bounds_by_the_running_average(silent_log):
    avg, step = torch.tensor([2.0]).npu(), torch.tensor([0]).npu()
    # step 0: the bound is avg itself (level 2 above 2 * 1e4), then avg = 0.5 * avg + 0.5 * val
    assert _check_v3(3e4, avg, step) == (2, _ema(2.0, 3e4), 1)
    # step 1: the bound is avg / (1 - 0.5) = 30002: level 1 above 3.0002e10, level 2 above 3.0002e8
    assert _check_v3(3e8, avg, step) == (0, _ema(15001.0, 3e8), 2)
    assert _check_v3(float("nan"), avg, step) == (1, _ema(15001.0, 3e8), 3)  # level 1; the average keeps finite values
    bound = float(avg) / (1 - 0.5**3)
    assert _check_v3(bound * 1e6 * 1.01, avg, step)[0] == 1
    assert _check_v3(bound * 1e4 * 0.99, torch.tensor([float(avg)]).npu(), torch.tensor([3]).npu())[0] == 0
    assert [m.split(":")[0] for m in silent_log] == ["silent check level 2 alarm"] + ["silent check level 1 fault"] * 2


def test_v3_stops_with_the_gradient_cleared_and_refuses_bad_arguments(silent_log):
    avg, step, grad = torch.tensor([1.0]).npu(), torch.tensor([0]).npu(), torch.ones(3).npu()
    assert _check_v3(2.0, avg, step, npu_asd_detect=3) == (0, 1.5, 1)
    assert silent_log[-1] == "silent check val=2.0"
    with pytest.raises(RuntimeError) as info:
        _check_v3(float("inf"), avg, step, npu_asd_detect=2, grad=grad)
    assert str(info.value).splitlines()[0] == (
        "_npu_silent_check_v3: silent data corruption: val=inf is a level 1 fault (npu_asd_detect=2: the card stops "
        "here and resumes from the last checkpoint)"
    )
    assert (float(avg), int(step)) == (1.5, 1) and torch.equal(grad.cpu(), torch.zeros(3))
    for kwargs, message in (
        (
            {"thresholds": (1e4, 1e4)},
            "the cThreshL1 value is 10000.000000, cannot be less than or equal to cThreshL2 value 10000.000000.",
        ),  # fmt: skip
        ({"betal": 1.5}, "the beta1 value is 1.500000, cannot be less than 0 or greater than 1."),
    ):
        with pytest.raises(RuntimeError) as info:
            _check_v3(1.0, avg, step, **kwargs)
        assert str(info.value).splitlines()[0] == f"_npu_silent_check_v3: {message}"
    grad, most, one = torch.ones(3).npu(), torch.tensor([1.0]).npu(), torch.tensor([1.0]).npu()
    for name, args in (("val", (torch.ones(2).npu(), grad, step, most, avg)), ("max", (one, grad, step, torch.ones(2).npu(), avg))):  # fmt: skip
        with pytest.raises(RuntimeError) as info:
            torch_npu._npu_silent_check_v3(*args, 1e6, 1e4, 0.5, 1)
        assert str(info.value).splitlines()[0] == f"_npu_silent_check_v3: {name} must hold one value, got shape (2,)"
    with pytest.raises(RuntimeError) as info:
        _check_v3(1.0, avg, torch.tensor([0], dtype=torch.int32).npu())
    assert str(info.value).splitlines()[0] == "_npu_silent_check_v3: step must be int64, got torch.int32"
    assert (float(avg), int(step)) == (1.5, 1)  # refused calls change nothing
