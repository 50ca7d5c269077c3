"""torch_npu.profiler._profiler_path_creator.ProfPathCreator: where each session's `..._ascend_pt` directory goes,
for tensorboard_trace_handler and for custom on_trace_ready handlers written as torch_npu's documentation shows
(set the directory with ProfPathCreator().init, analyse with prof.prof_if.analyse(), then move the result)."""

import glob
import os
import shutil
import socket

import pytest
import torch
from error_cases import first_line

import torch_npu
from torch_npu.profiler._profiler_path_creator import ProfPathCreator


def _record(handler):
    with torch_npu.profiler.profile(on_trace_ready=handler) as prof:
        (torch.ones(8, device="npu") * 3).sum()
    return prof


def test_the_creator_is_one_object_and_names_the_last_session(tmp_path):
    assert ProfPathCreator() is ProfPathCreator()
    _record(torch_npu.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w1"))
    (session,) = glob.glob(str(tmp_path / "w1_*_ascend_pt"))
    assert ProfPathCreator().get_prof_dir() == session
    assert os.path.isfile(os.path.join(session, "ASCEND_PROFILER_OUTPUT", "trace_view.json"))


def test_a_documented_custom_handler_analyses_and_moves_the_result(tmp_path):
    local, shared = tmp_path / "local", tmp_path / "shared"

    def user_trace_handler(local_dir, shared_dir):
        ProfPathCreator().init(worker_name="user", dir_name=str(local_dir))

        def handler_fn(prof_inst):
            prof_inst.prof_if.analyse()
            shutil.move(str(local_dir), str(shared_dir))

        return handler_fn

    _record(user_trace_handler(local, shared))
    (session,) = glob.glob(str(shared / "user_*_ascend_pt"))
    assert os.path.isfile(os.path.join(session, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))
    assert not local.exists()


def test_a_custom_handler_gets_the_raw_session_which_analyse_parses_later(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASCEND_WORK_PATH", raising=False)
    ProfPathCreator().init()
    seen = []
    prof = _record(lambda p: seen.append(p.prof_if.prof_path))
    (session,) = glob.glob(str(tmp_path / "*_ascend_pt"))
    assert seen == [session] == [prof.prof_if.prof_path]
    assert os.path.isdir(os.path.join(session, "FRAMEWORK"))
    assert not os.path.exists(os.path.join(session, "ASCEND_PROFILER_OUTPUT"))
    torch_npu.profiler.analyse(session)
    assert os.path.isfile(os.path.join(session, "ASCEND_PROFILER_OUTPUT", "trace_view.json"))


def test_each_tensorboard_handler_keeps_its_own_directory(tmp_path):
    first = torch_npu.profiler.tensorboard_trace_handler(str(tmp_path / "a"), worker_name="wa")
    second = torch_npu.profiler.tensorboard_trace_handler(str(tmp_path / "b"), worker_name="wb")
    _record(first)
    _record(second)
    assert len(glob.glob(str(tmp_path / "a" / "wa_*_ascend_pt"))) == 1
    assert len(glob.glob(str(tmp_path / "b" / "wb_*_ascend_pt"))) == 1


def test_default_directory_is_ascend_work_paths_profiling_data(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path))
    creator = ProfPathCreator()
    creator.init(worker_name="env")
    path = creator.create_prof_dir()
    assert os.path.dirname(path) == str(tmp_path / "profiling_data") and os.path.isdir(path)
    assert os.path.basename(path).startswith("env_") and path.endswith("_ascend_pt")
    creator.delete_prof_dir()
    assert not os.path.exists(path)


def test_invalid_arguments_warn_and_fall_back_to_the_defaults(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASCEND_WORK_PATH", raising=False)
    creator = ProfPathCreator()
    creator.init(worker_name="x" * 300, dir_name=5)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("profiler.py: Invalid parameter worker_name, reset it to default.")
    assert lines[1].endswith("profiler.py: Invalid parameter dir_name, reset it to default.")
    path = creator.create_prof_dir()
    assert os.path.dirname(path) == str(tmp_path)
    assert os.path.basename(path).startswith(f"{socket.gethostname()}_{os.getpid()}_")
    (tmp_path / "a_file").write_text("")
    with pytest.raises(RuntimeError) as info:
        creator.init(dir_name=str(tmp_path / "a_file"))
    assert first_line(info.value) == f"Invalid input path is a file path: {tmp_path / 'a_file'}"


def test_analyse_before_any_session_is_refused():
    prof = torch_npu.profiler.profile()
    with pytest.raises(RuntimeError) as info:
        prof.prof_if.analyse()
    assert str(info.value) == "the profiler has saved no session yet: prof_if.analyse() is for on_trace_ready"


def test_deleting_a_directory_that_was_never_made_warns(capsys):
    creator = ProfPathCreator()
    saved = creator._prof_path
    creator._prof_path = None
    try:
        creator.delete_prof_dir()
    finally:
        creator._prof_path = saved
    assert capsys.readouterr().out.rstrip().endswith("profiler.py: Remove temporary profiling data saving path failed.")
