"""The hccl backend's silent-data-corruption check (NPU_ASD_ENABLE) and the model state it reads."""

import pytest
from subprocess_helpers import run_python
from test_distributed import _all_ok, launch

import torch_npu

_PARAM = "ERR00001 PTA invalid parameter"


@pytest.mark.parametrize(
    ("setter", "value", "message"),
    [
        ("_npu_set_module_train_state", "eval", "invalid value of train_state, expected one of `train`, `infer`"),
        ("_npu_set_module_train_state", 1, "invalid value of train_state, train_state must string"),
        ("_npu_set_call_state", "backwards", "invalid value of call_state, expected one of `forward`, `backward`"),
        ("_npu_set_call_state", None, "invalid value of call_state, call_state must string"),
    ],
)
def test_model_state_setters_refuse_what_torch_npu_refuses(setter, value, message):
    with pytest.raises(RuntimeError) as err:
        getattr(torch_npu._C, setter)(value)
    assert str(err.value).splitlines()[0] == message and _PARAM in str(err.value)


def test_thresholds_are_torch_npus_defaults_without_the_variables():
    assert torch_npu._C._silent_check_thresholds() == ((1000000.0, 10000.0), (100000.0, 5000.0))


@pytest.mark.parametrize(
    ("upper", "sigma", "expected"),
    [
        ("2000000,20000", "50000,2000", ((2000000.0, 20000.0), (50000.0, 2000.0))),
        ("1500000,1", "7,0", ((1500000.0, 3.0), (7.0, 3.0))),  # each at least 3
        ("10,100", "6000,6000", ((1000000.0, 10000.0), (100000.0, 5000.0))),  # level 1 not above level 2
    ],
)
def test_threshold_variables_are_read_as_torch_npu_reads_them(upper, sigma, expected):
    out = run_python(
        "import torch_npu; print(torch_npu._C._silent_check_thresholds())",
        env={"NPU_ASD_UPPER_THRESH": upper, "NPU_ASD_SIGMA_THRESH": sigma},
    )
    assert out.stdout.strip().splitlines()[-1] == str(expected)


def test_training_backward_collectives_are_judged_and_faults_logged():
    _all_ok(launch("silent_check_logs_faults", 2, extra_env={"NPU_ASD_ENABLE": "1"}))


def test_a_fault_stops_the_collective_at_level_two_and_the_group_goes_on():
    _all_ok(launch("silent_check_stops_at_a_fault", 2, extra_env={"NPU_ASD_ENABLE": "2"}))
