"""Ascend's own profile analyser, msprof-analyze (PyPI), run for real on vnpu's profiles: the advisor and
the comparison of two sessions (whole and per step) read vnpu's output as they read a card's."""

import glob
import importlib.util
import os
import re
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


def _train_session(out, steps=3):
    # large enough that each step computes for milliseconds (compare prints seconds to 3 decimals)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(512, 512, device="npu"), torch.randint(0, 10, (512,), device="npu")
    config = torch_npu.profiler._ExperimentalConfig(
        profiler_level=torch_npu.profiler.ProfilerLevel.Level1,
        aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization,
    )
    with recording_profiler(out, steps, config, profile_memory=True) as prof:
        for _ in range(steps):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    return the_session(out)


def _run(*args, cwd):
    done = subprocess.run([MSPROF_ANALYZE, *args], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    root = tmp_path_factory.mktemp("msprof")
    return _train_session(root / "a"), _train_session(root / "b"), root


def _milliseconds(text, label):
    found = re.search(label + r"([0-9.]+)ms", text)
    assert found, text
    return float(found.group(1))


def test_advisor_reads_the_time_split_and_the_device(sessions):
    session, _, root = sessions
    report = _run("advisor", "all", "-d", session, "-o", str(root / "advisor"), cwd=root)
    e2e = _milliseconds(report, "模型E2E的时间是")
    computing = _milliseconds(report, "计算时长是")
    assert 0 < computing <= e2e
    assert "动态shape算子" not in report  # kernel_details' OP State says the operators are static
    assert "Can not find ai core frequency" not in report  # info.json gives the AI Core frequency
    assert "AICore核数" in report and "24个AICore核" in report  # the SoC's cores, from info.json
    assert "Synchronize Stream Issues" not in report  # no wait for the stream after the launches


def test_advisor_finds_the_stream_synchronisation_of_launch_blocking(tmp_path, monkeypatch):
    # torch_npu synchronises the stream after every launch under ASCEND_LAUNCH_BLOCKING=1; the CANN level shows it
    monkeypatch.setenv("ASCEND_LAUNCH_BLOCKING", "1")
    session = _train_session(tmp_path / "blocking", steps=1)
    report = _run("advisor", "all", "-d", session, "-o", str(tmp_path / "advisor"), cwd=tmp_path)
    found = re.search(
        r"发现(\d+)个SynchronizeStreams和(\d+)个NodeLaunch，SynchronizeStream和NodeLaunch的共现率为1.0", report
    )
    assert "Synchronize Stream Issues" in report and found, report
    assert int(found.group(1)) == int(found.group(2)) > 0


def _distribution_rows(text):
    rows = [line for line in text.splitlines() if line.startswith("| NPU |")]
    assert len(rows) == 2, text
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def _count(cell):
    return int(cell.split("(")[1].rstrip(")"))


def _seconds(cell):
    return float(cell.split("s")[0])


@pytest.mark.parametrize("steps", [(), ("--base_step", "1", "--comparison_step", "2")], ids=["whole", "per_step"])
def test_compare_finds_computing_free_and_end_to_end_time(sessions, steps):
    a, b, root = sessions
    output = root / ("compare" + "_".join(steps))
    text = _run("compare", "-d", a, "-bp", b, *steps, "-o", str(output), cwd=root)
    assert "Failed to get overlap analysis data" not in text and "Can't find any flow event" not in text
    header = next(line for line in text.splitlines() if "Computing Time" in line)
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    for row in _distribution_rows(text):
        values = dict(zip(columns, row))
        computing, e2e = _seconds(values["Computing Time"]), _seconds(values["E2E Time(Not minimal profiling)"])
        assert 0 < computing <= e2e
        # the cube (MatMulV2) and vector kernels are told apart: (count) of each
        assert _count(values["Cube Time(Num)"]) > 0 and _count(values["Vector Time(Num)"]) > 0
    assert glob.glob(str(output / "performance_comparison_result_*.xlsx"))
