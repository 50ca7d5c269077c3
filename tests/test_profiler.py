"""torch_npu.profiler: a small training loop profiled through a schedule writes torch_npu's directory
with the exact csv headers; row counts match the operators executed; trace_view.json follows the Chrome
trace event format (numeric ts, ph, pid/tid, small flow ids)."""

import csv
import glob
import json
import os

import pytest
import torch
from error_cases import raises_exactly

import torch_npu
from torch_npu.profiler import ascend_output


def _train_step(model, opt, x):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_schedule_actions_match_torchs():
    ours = torch_npu.profiler.schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=1)
    theirs = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=1)
    assert [ours(i).name for i in range(8)] == [theirs(i).name for i in range(8)]
    assert ours(4) == torch_npu.profiler.ProfilerAction.RECORD_AND_SAVE


def test_a_scheduled_training_loop_writes_the_ascend_files(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8, device="npu")
    counted = []
    hook = torch_npu._C._add_python_op_hook(lambda name, *a: counted.append(name))
    try:
        with torch_npu.profiler.profile(
            activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
            schedule=torch_npu.profiler.schedule(wait=1, warmup=1, active=2, repeat=1),
            on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w0"),
            record_shapes=True,
        ) as prof:
            for step in range(5):
                if step in (2, 3):
                    counted.append("--record--")
                _train_step(model, opt, x)
                if step in (2, 3):
                    counted.append("--end--")
                prof.step()
    finally:
        torch_npu._C._remove_op_hook(hook)
    recorded_ops = []
    inside = False
    for name in counted:
        if name == "--record--":
            inside = True
        elif name == "--end--":
            inside = False
        elif inside:
            recorded_ops.append(name)
    (session,) = glob.glob(str(tmp_path / "w0_*_ascend_pt"))
    out = os.path.join(session, "ASCEND_PROFILER_OUTPUT")
    kernels = _rows(os.path.join(out, "kernel_details.csv"))
    assert kernels[0] == ["Step Id"] + ascend_output.KERNEL_HEADER + ascend_output.SHAPE_HEADER
    assert len(kernels) - 1 == len(recorded_ops) and {r[0] for r in kernels[1:]} == {"2", "3"}
    assert [r[2] for r in kernels[1:]] == [op.split("::")[-1].split(".")[0] for op in recorded_ops]
    addmm = next(r for r in kernels[1:] if r[2] == "addmm")
    assert addmm[4] == "AI_CORE" and addmm[9] == "8;4,8;8,8"  # bias, input, weight^T of the first Linear
    assert _rows(os.path.join(out, "operator_details.csv"))[0] == ascend_output.OPERATOR_HEADER
    statistic = _rows(os.path.join(out, "op_statistic.csv"))
    assert statistic[0] == ascend_output.STATISTIC_HEADER
    assert sum(int(r[2]) for r in statistic[1:]) == len(recorded_ops)
    assert abs(sum(float(r[7]) for r in statistic[1:]) - 100.0) < 0.1
    steps = _rows(os.path.join(out, "step_trace_time.csv"))
    assert steps[0] == ascend_output.STEP_HEADER and [r[1] for r in steps[1:]] == ["2", "3"]
    for row in steps[1:]:
        assert float(row[2]) > 0 and float(row[6]) >= 0
    info = json.load(open(os.path.join(session, "profiler_info.json")))
    assert info["config"]["common_config"]["record_shapes"] is True and info["torch_npu_version"]
    trace = json.load(open(os.path.join(out, "trace_view.json")))
    for event in trace:
        assert event["ph"] in ("X", "M", "s", "f") and isinstance(event["pid"], int) and isinstance(event["tid"], int)
        if event["ph"] != "M":
            assert isinstance(event["ts"], float) and event["ts"] >= 0
        if event["ph"] in ("s", "f"):
            assert 0 < event["id"] < 2**53
    assert sum(e["ph"] == "X" and e["cat"] == "kernel" for e in trace) == len(recorded_ops)


def test_without_a_schedule_every_step_records_and_stop_saves(tmp_path):
    with torch_npu.profiler.profile(on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(tmp_path))) as p:
        torch.ones(3, device="npu").add(1).mul(2)
    assert [a["name"] for a in p.activities_recorded][-2:] == ["aten::add.Tensor", "aten::mul.Tensor"]
    (session,) = glob.glob(str(tmp_path / "*_ascend_pt"))
    kernels = _rows(os.path.join(session, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))
    assert kernels[0] == ascend_output.KERNEL_HEADER  # no Step Id without a schedule, no shapes unless asked
    assert not torch_npu._C._activity_recording()


def test_experimental_config_keeps_valid_values_and_warns_on_use_cuda():
    cfg = torch_npu.profiler._ExperimentalConfig(
        profiler_level=torch_npu.profiler.ProfilerLevel.Level1, aic_metrics=torch_npu.profiler.AiCMetrics.Memory
    )
    assert cfg.to_dict()["_aic_metrics"] == "ACL_AICORE_MEMORY_BANDWIDTH"
    assert "Level2" in torch_npu.profiler.supported_profiler_level()
    assert torch_npu.profiler.supported_export_type() == {"db", "text"}
    with pytest.warns(UserWarning, match="This is npu environment, use_cuda is invalid"):
        torch_npu.profiler.profile(use_cuda=True)


def _profiler_warnings(capsys):
    return [line.split("profiler.py: ", 1)[1] for line in capsys.readouterr().out.splitlines() if "[WARNING]" in line]


def test_experimental_config_resets_invalid_values_with_a_warning(capsys, monkeypatch):
    """As torch_npu: a bad value is printed as a profiler warning and replaced by its default."""
    monkeypatch.delenv("RANK", raising=False)
    cfg = torch_npu.profiler._ExperimentalConfig(profiler_level="Level9", export_type="csv", l2_cache="yes")
    assert (cfg.profiler_level, cfg.export_type, cfg.to_dict()["_l2_cache"]) == ("Level0", ["text"], False)
    assert _profiler_warnings(capsys) == [
        "Invalid parameter profiler_level, reset it to ProfilerLevel.Level0.",
        "Please use level1 or level2 if you want to collect aic metrics, reset aic metrics to None!",
        "Invalid parameter l2_cache, which must be of bool type, reset it to False.",
        "Invalid parameter export_type, reset it to text.",
    ]
    cfg = torch_npu.profiler._ExperimentalConfig(profiler_level="Level1", aic_metrics="ACL_NOTHING")
    assert cfg.aic_metrics == "ACL_AICORE_PIPE_UTILIZATION"
    none_level = torch_npu.profiler._ExperimentalConfig(profiler_level="Level_none")
    assert none_level.tx_enabled and none_level.aic_metrics == "ACL_AICORE_NONE"
    monkeypatch.setenv("TORCH_NPU_WARNING_DISABLE", "1")
    capsys.readouterr()
    torch_npu.profiler._ExperimentalConfig(profiler_level="Level9")
    assert _profiler_warnings(capsys) == []


def test_experimental_config_mstx_domains_host_sys_and_native_config(capsys):
    from torch_npu._C._profiler import _ExperimentalConfig as NativeConfig

    config = torch_npu.profiler._ExperimentalConfig
    assert config(mstx_domain_include=["x"])._mstx_domain_include == []  # only with mstx / msprof_tx
    both = config(mstx=True, mstx_domain_include=["x", "x"], mstx_domain_exclude=["y"])
    assert (both._mstx_domain_include, both._mstx_domain_exclude) == (["x"], [])
    assert config(mstx=True, mstx_domain_exclude=[1])._mstx_domain_exclude == []
    assert config(host_sys=["cpu", "mem"])._host_sys == ["cpu", "mem"]
    assert config(host_sys=["gpu"])._host_sys == []
    native = config(profiler_level="Level2", aic_metrics="ACL_AICORE_L2_CACHE", mstx=True, host_sys=["cpu"])()
    assert isinstance(native, NativeConfig)
    assert (native.trace_level, native.metrics, native.msprof_tx, native.host_sys) == (
        "Level2",
        "ACL_AICORE_L2_CACHE",
        True,
        ["cpu"],
    )


def test_profiler_constants_and_native_interface():
    from torch_npu._C._profiler import ProfilerActivity, _get_freq, _get_monotonic, _get_syscnt_enable
    from torch_npu.profiler.analysis.prof_common_func._cann_package_manager import CannPackageManager
    from torch_npu.profiler.analysis.prof_common_func._constant import Constant

    assert {Constant.LEVEL0, Constant.LEVEL1, Constant.LEVEL2, Constant.LEVEL_NONE} == (
        torch_npu.profiler.supported_profiler_level()
    )
    assert Constant.AicMetricsNone in torch_npu.profiler.supported_ai_core_metrics()
    assert {Constant.Db, Constant.Text} == torch_npu.profiler.supported_export_type()
    assert ProfilerActivity is torch_npu.profiler.ProfilerActivity
    assert not _get_syscnt_enable() and _get_freq() == 1000
    first = _get_monotonic()
    assert _get_monotonic() >= first > 0
    assert CannPackageManager.is_support_export_db() and not CannPackageManager.is_support_default_export_db()


def test_schedule_resets_invalid_arguments_and_cycles(capsys, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    Action = torch_npu.profiler.ProfilerAction
    reset = torch_npu.profiler.schedule(wait=-1, active=0, warmup=-2, repeat=-1, skip_first=-1)
    assert (reset.wait, reset.active, reset.warmup, reset.repeat, reset.skip_first) == (0, 1, 0, 0, 0)
    assert [reset(step) for step in (0, 1, 10)] == [Action.RECORD_AND_SAVE] * 3
    assert "Invalid parameter active, reset it to 1." in capsys.readouterr().out
    once = torch_npu.profiler.schedule(wait=2, active=2, warmup=2, repeat=1, skip_first=2)
    assert [once(step) for step in (0, 3, 5, 6, 7, 13)] == [
        Action.NONE,
        Action.NONE,
        Action.WARMUP,
        Action.RECORD,
        Action.RECORD_AND_SAVE,
        Action.NONE,
    ]
    eager = torch_npu.profiler.schedule(wait=3, active=1, skip_first=1, skip_first_wait=1)
    assert [eager(step) for step in (0, 1, 2, 5)] == [
        Action.NONE,
        Action.RECORD_AND_SAVE,
        Action.NONE,
        Action.RECORD_AND_SAVE,
    ]
    with pytest.raises(ValueError, match="Invalid parameter step, which must be not less than 0"):
        once(-1)


def test_c_children_cd_logging_and_flops_count():
    import logging

    from torch_npu._C._cd import DType
    from torch_npu._C._flops_count import _FlopCountContext
    from torch_npu._C._logging import _LogContext

    assert (torch_npu.hifloat8, torch_npu.float4_e2m1fn_x2, torch_npu.int4) == (290, 296, 285)
    assert torch_npu.hifloat8 is DType.hifloat8
    with pytest.raises(
        RuntimeError, match="^npu_dtype_cast: dtype=torch_npu.hifloat8 is a format vnpu does not compute"
    ):
        torch_npu.npu_dtype_cast(torch.ones(2, device="npu"), torch_npu.hifloat8)
    _LogContext.GetInstance().setLogs({"torch_npu.memory": logging.DEBUG, "torch.other": logging.ERROR})
    assert logging.getLogger("torch_npu.memory").level == logging.DEBUG
    logging.getLogger("torch_npu.memory").setLevel(logging.NOTSET)
    counter = _FlopCountContext.GetInstance()
    counter.enable()
    torch.ones(4, 8, device="npu") @ torch.ones(8, 2, device="npu")
    counter.pause()
    torch.ones(4, 8, device="npu") @ torch.ones(8, 2, device="npu")
    counter.resume()
    counter.disable()
    assert (counter.recordedCount, counter.traversedCount) == (2 * 4 * 8 * 2, 2 * 2 * 4 * 8 * 2)
    counter.reset()
    assert counter.traversedCount == 0


def test_profiler_time_conversions_are_exact():
    from torch_npu.profiler.analysis.prof_common_func._constant import (
        contact_2num,
        convert_ns2us_float,
        convert_ns2us_str,
        convert_us2ns,
    )

    ns = 1459635878536856678  # beyond float precision: the text form keeps every digit
    assert convert_ns2us_str(ns) == "1459635878536856.678" and convert_ns2us_str(ns, "\t") == "1459635878536856.678\t"
    assert convert_ns2us_str(5) == "0.005" and convert_ns2us_str(-1500) == "-1.500"
    assert convert_ns2us_float(ns) == ns / 1000 and convert_ns2us_float(float("inf")) == float("inf")
    assert convert_ns2us_str(float("-inf")) == "-inf"
    assert convert_us2ns("1459635878536856.678\t") == ns == convert_us2ns("1459635878536856.678")
    assert convert_us2ns(1459635878536856.678) == 1459635878536856800  # the float's own digits
    assert convert_us2ns("12") == 12000 and convert_us2ns("0.5") == 500
    assert contact_2num(1, 1) == 1 << 32 | 1
    for call in (lambda: convert_ns2us_float(18789.89), lambda: convert_ns2us_str(1.5)):
        raises_exactly(call, RuntimeError, "Input must be integer.")
    raises_exactly(lambda: convert_us2ns("1.2.3"), RuntimeError, "Invalid input us!")
