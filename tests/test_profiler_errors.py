"""Every error and warning the profiler, analyse, dynamic_profile, the report and the profiling command
line give, with the exact text a user sees."""

import json
import os
import sys

import pytest
import torch

import torch_npu
from torch_npu.profiler import dynamic_profile, report
from torch_npu.profiler import session as session_record
from vnpu import cli


def _write(path, data):
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_profile_argument_errors(tmp_path):
    prof = torch_npu.profiler.profile()
    with pytest.raises(TypeError) as callback:
        prof.set_custom_trace_id_callback("id-1")
    assert str(callback.value) == "callback must be callable, but got str"
    with pytest.raises(RuntimeError) as unsaved:
        prof.export_chrome_trace(str(tmp_path / "t.json"))
    assert str(unsaved.value) == (
        "torch_npu.profiler: no profiling data has been saved yet; run the profile (and its "
        "schedule) through a RECORD_AND_SAVE step or to stop() first"
    )
    with torch_npu.profiler.profile() as saved:
        torch.ones(2, device="npu").add(1)
    with pytest.raises(ValueError) as metric:
        saved.export_stacks(str(tmp_path / "s.txt"), metric="self_gpu_time_total")
    assert str(metric.value) == (
        "metric must be self_npu_time_total or self_cpu_time_total, got " "'self_gpu_time_total'"
    )


def test_another_pytorch_profiler_keeps_the_host_lanes():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        with pytest.warns(UserWarning) as warned:
            with torch_npu.profiler.profile() as prof:
                torch.ones(2, device="npu").add(1)
    assert str(warned[0].message) == (
        "torch_npu.profiler: another PyTorch profiler is already recording; host (CPU) "
        "activity is left to it and only npu activity is recorded"
    )
    assert prof.host_events_recorded == [] and prof.activities_recorded


def test_analyse_argument_and_data_errors(tmp_path):
    with pytest.raises(ValueError) as processes:
        torch_npu.profiler.analyse(str(tmp_path), max_process_number=0)
    assert str(processes.value) == "max_process_number must be a positive integer, got 0"
    with pytest.raises(ValueError) as export:
        torch_npu.profiler.analyse(str(tmp_path), export_type="csv")
    assert str(export.value) == "export_type must be among ['db', 'text'], got 'csv'"
    with pytest.raises(FileNotFoundError) as empty:
        torch_npu.profiler.analyse(str(tmp_path))
    assert str(empty.value) == (
        f"no profiling data to analyse under {tmp_path}: expected "
        "<worker>_<timestamp>_ascend_pt directories with FRAMEWORK/vnpu_profiler_data.json"
    )
    with pytest.raises(FileNotFoundError) as missing:
        session_record.load(str(tmp_path))
    assert str(missing.value) == (
        f"{tmp_path} is not a vnpu profiling directory: FRAMEWORK/vnpu_profiler_data.json " "is missing"
    )
    raw = tmp_path / "FRAMEWORK" / "vnpu_profiler_data.json"
    raw.parent.mkdir()
    _write(raw, "{not json")
    with pytest.raises(ValueError) as broken:
        session_record.load(str(tmp_path))
    assert str(broken.value) == (
        f"{raw} is not valid profiling data: Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1)"
    )
    _write(raw, {"version": 99})
    with pytest.raises(ValueError) as version:
        session_record.load(str(tmp_path))
    assert str(version.value) == f"{raw} is not vnpu profiling data of version 1"


def test_report_of_an_unparsed_directory(tmp_path):
    with pytest.raises(FileNotFoundError) as unparsed:
        report.summarize(str(tmp_path))
    assert str(unparsed.value) == (
        f"{tmp_path} has no ASCEND_PROFILER_OUTPUT/kernel_details.csv: not a parsed "
        "profiling session (run torch_npu.profiler.analyse on it first)"
    )


@pytest.mark.parametrize(
    "content, message",
    [
        ("[1, 2]", "must hold a JSON object"),
        ({"analyse": "yes"}, ": 'analyse' must be true or false, got 'yes'"),
        ({"warmup": -1}, ": 'warmup' must be an integer >= 0, got -1"),
        ({"active": True}, ": 'active' must be an integer >= 1, got True"),
        ({"activities": ["GPU"]}, ": 'activities' must be a non-empty list of \"CPU\" and \"NPU\", got ['GPU']"),
    ],
)
def test_dynamic_profile_config_errors(tmp_path, monkeypatch, content, message):
    monkeypatch.setattr(dynamic_profile, "_state", dynamic_profile._DynamicProfile())
    config = _write(tmp_path / "profiler_config.json", content)
    with pytest.raises(ValueError) as bad:
        dynamic_profile.start(str(config))
    assert str(bad.value) == f"dynamic_profile: {config}{' ' if message.startswith('must') else ''}{message}"


def test_dynamic_profile_usage_errors_and_warnings(tmp_path, monkeypatch):
    monkeypatch.setattr(dynamic_profile, "_state", dynamic_profile._DynamicProfile())
    with pytest.raises(ValueError) as nothing:
        dynamic_profile.start()
    assert (
        str(nothing.value)
        == "dynamic_profile.start: give a profiler_config.json path or call dynamic_profile.init first"
    )
    with pytest.raises(ValueError) as unreadable:
        dynamic_profile.start(str(tmp_path / "absent.json"))
    assert str(unreadable.value) == (
        f"dynamic_profile: cannot read {tmp_path / 'absent.json'}: [Errno 2] No such file "
        f"or directory: '{tmp_path / 'absent.json'}'"
    )
    dynamic_profile.init(str(tmp_path / "cfg"))
    with pytest.warns(UserWarning) as twice:
        dynamic_profile.init(str(tmp_path / "cfg"))
    assert str(twice[0].message) == "dynamic_profile.init: already initialised; the second call is ignored"
    config = tmp_path / "cfg" / "profiler_config.json"
    _write(config, {"active": 0})
    stamp = os.stat(config).st_mtime_ns + 10**9
    os.utime(config, ns=(stamp, stamp))
    with pytest.warns(UserWarning) as invalid:
        dynamic_profile.step()
    assert str(invalid[0].message) == (
        f"dynamic_profile: {config}: 'active' must be an integer >= 1, got 0; " "profiling not started"
    )
    _write(config, {"prof_dir": str(tmp_path / "out"), "active": 2})
    dynamic_profile.start()
    with pytest.warns(UserWarning) as running:
        dynamic_profile.start()
    assert str(running[0].message) == "dynamic_profile.start: the profiler is already running; this call is ignored"
    dynamic_profile._state.finish()


def test_program_profile_warns_about_bad_options(tmp_path):
    from subprocess_helpers import run_python

    proc = run_python(
        "import torch; print('ran')",
        env={"VNPU_PROFILE_OUTPUT": str(tmp_path), "VNPU_PROFILE_OPTIONS": "shapes"},
        check=False,
    )
    assert (
        "UserWarning: VNPU_PROFILE_OPTIONS: unknown option(s) shapes; choose from record_shapes, profile_memory, "
        "with_stack, with_modules, with_flops; profiling without options" in proc.stderr
    )
    assert "ran" in proc.stdout


def test_profile_command_output_and_program_errors(tmp_path, capsys):
    blocker = _write(tmp_path / "file", "x")
    assert cli.main(["profile", "-o", str(blocker / "out"), "--", sys.executable, "-c", "pass"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"vnpu profile: cannot create the output directory {blocker / 'out'}: " "Not a directory"
    )
    assert cli.main(["profile", "-o", str(tmp_path / "out"), "--", sys.executable, "-c", "pass"]) == 1
    assert capsys.readouterr().err.strip() == (
        "vnpu profile: the program wrote no profiling data (it never imported "
        "torch, or exited through os._exit / a signal)"
    )
