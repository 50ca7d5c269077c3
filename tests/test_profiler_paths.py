"""torch_npu.profiler.analysis.prof_common_func._path_manager: ProfilerPathManager finds the parts of a result
directory vnpu's profiler wrote (the framework side, profiler_info.json, the CANN PROF_* directory and its
device folders), and answers "" / [] for what is absent, with torch_npu's errors for a bad path."""

import glob
import os

import pytest
import torch

import torch_npu
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager


@pytest.fixture(scope="module")
def result_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("profile")
    handler = torch_npu.profiler.tensorboard_trace_handler(str(root), worker_name="w0")
    with torch_npu.profiler.profile(on_trace_ready=handler):
        (torch.ones(4, device="npu") * 2).sum()
    (session,) = glob.glob(str(root / "w0_*_ascend_pt"))
    return str(root), session


def test_a_vnpu_result_directory_is_found_with_its_parts(result_dir):
    root, session = result_dir
    assert ProfilerPathManager.get_profiler_path_list(root) == [session]
    assert ProfilerPathManager.get_profiler_path_list(session) == [session]
    assert ProfilerPathManager.get_fwk_path(session) == os.path.join(session, "FRAMEWORK")
    assert ProfilerPathManager.get_info_file_path(session) == os.path.join(session, "profiler_info.json")
    cann = ProfilerPathManager.get_cann_path(session)
    assert os.path.basename(cann).startswith("PROF_000001_") and os.path.isdir(cann)
    assert ProfilerPathManager.get_device_id(cann) == [0]
    assert ProfilerPathManager.get_device_path(cann) == [os.path.join(cann, "device_0")]
    info = os.path.join(cann, "device_0", "info.json.0")
    assert FileManager.read_json_file(info)["DeviceInfo"][0]["id"] == 0


def test_absent_parts_are_empty(tmp_path):
    assert ProfilerPathManager.get_fwk_path(str(tmp_path)) == ""
    assert ProfilerPathManager.get_cann_path(str(tmp_path)) == ""
    (tmp_path / "PROF_unnamed").mkdir()
    assert ProfilerPathManager.get_cann_path(str(tmp_path)) == ""  # not PROF_<n>_<time>_<id>
    assert ProfilerPathManager.get_device_id("") == [] and ProfilerPathManager.get_start_info_path(str(tmp_path)) == ""
    assert ProfilerPathManager.get_profiler_path_list(str(tmp_path / "missing")) == []
    assert ProfilerPathManager.get_output_all_file_list_by_type(str(tmp_path), "mindstudio_profiler_output") == []


def test_start_info_is_taken_from_the_host_before_the_devices(tmp_path):
    cann = tmp_path / "PROF_000001_20261204000000000_ABCD"
    (cann / "device_2").mkdir(parents=True)
    (cann / "device_2" / "start_info.2").write_text("{}")
    assert ProfilerPathManager.get_start_info_path(str(cann)) == str(cann / "device_2" / "start_info.2")
    (cann / "host").mkdir()
    (cann / "host" / "start_info").write_text("{}")
    assert ProfilerPathManager.get_start_info_path(str(cann)) == str(cann / "host" / "start_info")
    FileManager.create_json_file_by_path(str(cann / "host" / "info.json"), {"pid": 1})
    assert ProfilerPathManager.get_info_path(str(tmp_path)) == str(cann / "host" / "info.json")
    assert os.stat(cann / "host" / "info.json").st_mode & 0o777 == 0o640


def test_subdirectories_down_to_a_depth(tmp_path):
    (tmp_path / "a" / "b" / "c" / "d").mkdir(parents=True)
    everything = ProfilerPathManager.get_all_subdir(str(tmp_path))
    assert sorted(os.path.relpath(p, tmp_path) for p in everything) == ["a", "a/b", "a/b/c", "a/b/c/d"]
    shallow = ProfilerPathManager.get_all_subdir(str(tmp_path), max_depth=1)
    assert sorted(os.path.relpath(p, tmp_path) for p in shallow) == ["a", "a/b"]


def test_a_soft_link_or_an_empty_path_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(RuntimeError, match="Invalid input path is a soft chain: .*link") as info:
        ProfilerPathManager.get_realpath(str(tmp_path / "link"))
    assert str(info.value).splitlines()[0] == f"Invalid input path is a soft chain: {tmp_path / 'link'}"
    assert str(info.value).endswith("ERR04009 PROF resource unavailable")
    with pytest.raises(RuntimeError, match="Input path is empty, please check.") as info:
        ProfilerPathManager.get_realpath("")
    assert str(info.value).splitlines()[0] == "Input path is empty, please check."
    assert str(info.value).endswith("ERR04009 PROF resource unavailable")
    assert ProfilerPathManager.get_realpath(str(tmp_path / "real")) == os.path.realpath(tmp_path / "real")
