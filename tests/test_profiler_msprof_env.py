"""The profiler's database ids (torch_npu's _id_manager: STRING_IDS, CONNECTION_IDS, PYTORCH_CALLCHAINS) and its
stand-down under the msprof command line: a program profiled by msprof (PROFILER_SAMPLECONFIG / PROFILING_MODE set)
gets torch_npu's warning and its own torch_npu.profiler records nothing, while msprof's whole-program profile is
written."""

import glob
import os
import sqlite3
import sys

from subprocess_helpers import VNPU, run, run_python

from torch_npu.profiler.analysis.prof_common_func._constant import Constant, DbConstant
from torch_npu.profiler.analysis.prof_common_func._id_manager import (
    CallChainIdManager,
    ConnectionIdManager,
    Str2IdManager,
)


def test_the_id_managers_number_texts_launch_groups_and_stacks():
    texts = Str2IdManager()
    assert [texts.get_id_from_str(t) for t in ("a", "b", "a", "")] == [0, 1, 0, DbConstant.DB_INVALID_VALUE]
    assert texts.get_all_string_dict() == {"a": 0, "b": 1}
    assert Str2IdManager(keep_empty=True).get_id_from_str("") == 0
    groups = ConnectionIdManager()
    assert [groups.get_id_from_connection_ids(g) for g in ([3, 4], [5])] == [0, 1]
    assert groups.get_all_connection_ids() == {0: [3, 4], 1: [5]}
    chains = CallChainIdManager()
    ids = [chains.get_callchain_id_from_callstack(s) for s in ("f;\r\ng", "h", "f;\r\ng", "")]
    assert ids == [0, 1, 0, DbConstant.DB_INVALID_VALUE]
    assert chains.get_all_callchain_id() == {0: [("f", 0), ("g", 1)], 1: [("h", 0)]}


def test_with_stack_each_operator_names_its_call_chain_in_the_database(tmp_path):
    run_python(
        f"""
        import torch, torch_npu
        def layer(x):
            return torch.relu(x)
        config = torch_npu.profiler._ExperimentalConfig(export_type=[torch_npu.profiler.ExportType.Db])
        with torch_npu.profiler.profile(with_stack=True, experimental_config=config,
                                        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler({str(tmp_path)!r})):
            layer(torch.ones(4, device="npu"))
        """
    )
    (db,) = glob.glob(str(tmp_path / "*_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler*.db"))
    with sqlite3.connect(db) as connection:
        frames = connection.execute(
            "SELECT c.stackDepth, f.value FROM PYTORCH_API p JOIN STRING_IDS n ON p.name = n.id "
            "JOIN PYTORCH_CALLCHAINS c ON c.id = p.callchainId JOIN STRING_IDS f ON c.stack = f.id "
            "WHERE n.value = 'aten::relu' ORDER BY c.stackDepth"
        ).fetchall()
    assert "relu" in frames[0][1] and any("layer" in frame for _, frame in frames[1:])  # the innermost frame first
    assert [depth for depth, _ in frames] == list(range(len(frames))) and len(frames) >= 2


OWN_PROFILER = """
import sys, torch, torch_npu
with torch_npu.profiler.profile(on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(sys.argv[1])) as prof:
    torch.ones(4, device="npu").relu()
    prof.step()
torch.optim.SGD([torch.zeros(1, device="npu", requires_grad=True)], lr=1).step()
"""


def test_under_msprof_the_programs_own_profiler_stands_down(tmp_path):
    (tmp_path / "own.py").write_text(OWN_PROFILER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VNPU_PROFILE")}
    done = run(
        VNPU
        + ["profile", "-o", str(tmp_path / "msprof"), "--no-report", "--"]
        + [sys.executable, "own.py", str(tmp_path / "own")],
        env,
        cwd=str(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    assert "If performance data is collected using the 'msprof' tool. torch_npu profiler api is not effective." in (
        done.stdout
    )
    assert len(glob.glob(str(tmp_path / "msprof" / "*_ascend_pt"))) == 1
    assert glob.glob(str(tmp_path / "own" / "*_ascend_pt")) == []
    alone = run([sys.executable, "own.py", str(tmp_path / "alone")], env, cwd=str(tmp_path))
    assert alone.returncode == 0 and len(glob.glob(str(tmp_path / "alone" / "*_ascend_pt"))) == 1


def test_dynamic_msprof_mode_also_stands_the_api_down(tmp_path):
    (tmp_path / "own.py").write_text(OWN_PROFILER)
    env = dict(os.environ, **{Constant.MSPROF_DYNAMIC_ENV: "dynamic"})
    done = run([sys.executable, "own.py", str(tmp_path / "own")], env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (
        "Environment variable 'PROFILING_MODE' is set. torch_npu profiler api is not effective. "
        "Please execute 'unset PROFILING_MODE'." in done.stdout
    )
    assert glob.glob(str(tmp_path / "own" / "*_ascend_pt")) == []


def test_a_host_event_whose_name_cannot_be_decoded_is_left_out_not_fatal(monkeypatch):
    import torch

    from torch_npu.profiler import host_activity

    class Event:
        def __init__(self, name):
            self._name = name

        def activity_type(self):
            return "python_function"

        def device_type(self):
            return torch.autograd.DeviceType.CPU

        def name(self):
            if self._name is None:
                raise UnicodeDecodeError("utf-8", b"\\x80", 0, 1, "invalid start byte")
            return self._name

        start_ns = duration_ns = start_thread_id = correlation_id = lambda self: 0

    class Result:
        def events(self):
            return [Event("layer"), Event(None), Event("forward")]

    recorder = host_activity.HostRecorder(with_stack=True)
    recorder._on = True
    monkeypatch.setattr(host_activity, "_disable_profiler", Result)
    assert [e["name"] for e in recorder.stop()] == ["layer", "forward"]
