"""msprof-analyze's module statistics (`-m module_statistic`, PyPI's msprof-analyze run for real) over vnpu's
database export: the model's layers marked with mstx ranges in the "Module" domain, each layer's operators and
their kernels, and the backward layers found through autograd's forward-backward links — read from MSTX_EVENTS,
CONNECTION_IDS and PYTORCH_API as on a card's database."""

import glob
import importlib.util
import os
import sqlite3
import subprocess
import sys

import pytest
import torch
from profiler_sessions import recording_profiler, the_session

import torch_npu

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("msprof_analyze") is None,
    reason="msprof-analyze is not installed (pip install msprof-analyze)",
)
MSPROF_ANALYZE = os.path.join(os.path.dirname(sys.executable), "msprof-analyze")
mstx = torch_npu.npu.mstx


def _layer(name, fn, x):
    r = mstx.range_start(name, domain="Module")
    y = fn(x)
    mstx.range_end(r, domain="Module")
    return y


def _profile(out, steps=2):
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).npu()
    x = torch.randn(32, 64, device="npu")
    config = torch_npu.profiler._ExperimentalConfig(
        export_type=[torch_npu.profiler.ExportType.Text, torch_npu.profiler.ExportType.Db],
        profiler_level=torch_npu.profiler.ProfilerLevel.Level1,
        mstx=True,
    )
    with recording_profiler(out, steps, config) as prof:
        for _ in range(steps):
            whole = mstx.range_start("model", domain="Module")
            h = _layer("fc2", model[2], model[1](_layer("fc1", model[0], x)))
            mstx.range_end(whole, domain="Module")
            mstx.mark("step done", domain="default")
            h.sum().backward()
            prof.step()
    return the_session(out)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return _profile(tmp_path_factory.mktemp("modules"))


def _query(session, sql):
    (db,) = glob.glob(os.path.join(session, "ASCEND_PROFILER_OUTPUT", "ascend_pytorch_profiler*.db"))
    with sqlite3.connect(db) as connection:
        return connection.execute(sql).fetchall()


def test_mstx_events_hold_the_ranges_and_marks_with_their_domains(session):
    rows = _query(
        session,
        "SELECT m.eventType, s.value, d.value, m.startNs <= m.endNs FROM MSTX_EVENTS m "
        "JOIN STRING_IDS s ON m.message = s.id JOIN STRING_IDS d ON m.domainId = d.id ORDER BY m.startNs",
    )
    assert all(ordered for *_, ordered in rows)
    ranges = [r for r in rows if r[0] == 2]
    marks = [r for r in rows if r[0] == 0]
    assert [r[1] for r in ranges] == ["model", "fc1", "fc2"] * 2 and {r[2] for r in ranges} == {"Module"}
    assert [(r[1], r[2]) for r in marks] == [("step done", "default")] * 2


def test_each_operator_names_the_launches_of_its_kernels(session):
    rows = _query(
        session,
        "SELECT api.value, kernel.value FROM PYTORCH_API p JOIN STRING_IDS api ON p.name = api.id "
        "JOIN CONNECTION_IDS c ON c.id = p.connectionId JOIN TASK t ON t.connectionId = c.connectionId "
        "JOIN COMPUTE_TASK_INFO k ON k.globalTaskId = t.globalTaskId JOIN STRING_IDS kernel ON k.name = kernel.id",
    )
    kernels = _query(session, "SELECT COUNT(*) FROM COMPUTE_TASK_INFO")[0][0]
    assert len(rows) == kernels  # every kernel belongs to exactly one operator
    assert rows.count(("aten::addmm", "addmm")) == 4 and rows.count(("aten::relu", "relu")) == 2


def test_module_statistic_finds_the_layers_their_operators_and_the_backward_layers(session, tmp_path):
    done = subprocess.run(
        [MSPROF_ANALYZE, "-m", "module_statistic", "-d", os.path.dirname(session), "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(tmp_path / "cluster_analysis_output" / "cluster_analysis.db") as connection:
        rows = connection.execute(
            "SELECT parentModule, module, opName, kernelList, opCount FROM ModuleStatistic"
        ).fetchall()
    assert ("model", "fc1", "aten::addmm", "addmm", 2) in rows
    assert ("model", "fc2", "aten::addmm", "addmm", 2) in rows
    assert ("", "model", "aten::relu", "relu", 2) in rows
    backward = {(parent, module) for parent, module, *_ in rows if module.startswith("[Backward]")}
    assert backward == {("model", "[Backward]fc1"), ("model", "[Backward]fc2"), ("", "[Backward]model")}
    assert any(module == "[Backward]fc1" and op == "aten::mm" for _, module, op, *_ in rows)
