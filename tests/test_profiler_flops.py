"""_ExperimentalConfig(record_flops=True): while the profiler records, each call of a function with a FLOPs formula
runs inside an mstx range "<flops>-<op>" of the mfu_flops domain (counted from its real arguments); the database
keeps those ranges, and msprof-analyze's operator_mfu (PyPI, run for real) divides each kernel's FLOPs by its
duration and the card's peak. The functions are wrapped only while the recording runs."""

import glob
import importlib.util
import json
import logging
import os
import sqlite3
import subprocess
import sys
import types

import pytest
import torch
from profiler_sessions import recording_profiler, the_session
from torch import mm  # a reference to a counted function taken before any recording

import torch_npu
from torch_npu._patches import FLOPS_COUNTING, PATCHES, RUNTIME_PATCHES, set_runtime_patch
from torch_npu.profiler._flops_hook import FlopsHookManager
from torch_npu.profiler._flops_registry import _npu_flop_registry, register_npu_flop


def _config(**options):
    return torch_npu.profiler._ExperimentalConfig(
        export_type=[torch_npu.profiler.ExportType.Db],
        profiler_level=torch_npu.profiler.ProfilerLevel.Level1,
        **options,
    )


def _mstx_events(session):
    (db,) = glob.glob(os.path.join(session, "ASCEND_PROFILER_OUTPUT", "ascend_pytorch_profiler*.db"))
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT s.value, d.value FROM MSTX_EVENTS m JOIN STRING_IDS s ON m.message = s.id "
            "JOIN STRING_IDS d ON m.domainId = d.id ORDER BY m.startNs"
        ).fetchall()


def _record(out, step, **options):
    with recording_profiler(out, 1, _config(**options)) as prof:
        step()
        prof.step()
    return the_session(out)


def test_each_counted_call_is_a_range_with_its_flops(tmp_path):
    a, b = torch.randn(16, 32, device="npu"), torch.randn(32, 8, device="npu")
    batch = torch.randn(3, 16, 32, device="npu"), torch.randn(3, 32, 8, device="npu")
    weight = torch.randn(24, 32, device="npu")
    q = k = v = torch.randn(2, 4, 8, 16, device="npu", dtype=torch.float16)

    def step():
        torch.mm(a, b)
        torch.bmm(*batch)
        torch.matmul(batch[0], b)
        torch.addmm(torch.zeros(8, device="npu"), a, b)
        torch.nn.functional.linear(a, weight)
        torch_npu.npu_fusion_attention(q, k, v, 4, "BNSD", scale=0.25)

    events = _mstx_events(_record(tmp_path, step, record_flops=True))
    assert events == [
        (f"{2 * 16 * 32 * 8}-mm", "mfu_flops"),
        (f"{2 * 3 * 16 * 32 * 8}-bmm", "mfu_flops"),
        (f"{2 * 3 * 16 * 32 * 8}-matmul", "mfu_flops"),
        (f"{2 * 16 * 32 * 8}-addmm", "mfu_flops"),
        (f"{2 * 16 * 32 * 24}-linear", "mfu_flops"),
        (f"{2 * 2 * 4 * 8 * 8 * (16 + 16)}-npu_fusion_attention", "mfu_flops"),
    ]


def test_the_functions_are_wrapped_only_while_the_recording_runs(tmp_path):
    originals = torch.mm, torch.nn.functional.linear, torch_npu.npu_fusion_attention
    seen = []

    def step():
        seen.append((torch.mm is originals[0], sys.modules[__name__].mm is originals[0]))

    _record(tmp_path, step, record_flops=True)
    assert seen == [(False, False)]  # other modules' references are wrapped too
    assert (torch.mm, torch.nn.functional.linear, torch_npu.npu_fusion_attention) == originals
    assert mm is originals[0] and not FlopsHookManager.is_installed()
    _record(tmp_path / "off", step)
    assert seen[-1] == (True, True)


def test_a_call_inside_a_counted_call_is_not_counted_again_and_a_failing_formula_counts_nothing(tmp_path, caplog):
    module = types.ModuleType("flops_test_functions")
    module.outer = lambda x: torch.mm(x, x)
    module.broken = lambda x: torch.relu(x)
    sys.modules[module.__name__] = module
    register_npu_flop(target=f"{module.__name__}:outer", op_name="outer")(lambda x: 7)
    register_npu_flop(target=f"{module.__name__}:broken", op_name="broken")(lambda x: 1 // 0)
    x = torch.randn(4, 4, device="npu")
    try:
        with caplog.at_level(logging.WARNING, logger="torch_npu.profiler._flops_hook"):
            events = _mstx_events(_record(tmp_path, lambda: (module.outer(x), module.broken(x)), record_flops=True))
    finally:
        del sys.modules[module.__name__]
        _npu_flop_registry.pop("outer")
        _npu_flop_registry.pop("broken")
    assert events == [("7-outer", "mfu_flops")]
    assert "Failed to calculate FLOPs for broken" in caplog.text


def test_mstx_ranges_are_kept_only_as_the_configuration_asks(tmp_path):
    mstx = torch_npu.npu.mstx

    def step():
        for domain in ("Module", "default", "other"):
            mstx.range_end(mstx.range_start(f"in {domain}", domain=domain), domain=domain)

    assert _mstx_events(_record(tmp_path / "off", step)) == []
    kept = _mstx_events(_record(tmp_path / "on", step, mstx=True))
    assert [m for m, _ in kept] == ["in Module", "in default", "in other"]
    include = _mstx_events(_record(tmp_path / "include", step, mstx=True, mstx_domain_include=["Module"]))
    assert include == [("in Module", "Module")]
    exclude = _mstx_events(_record(tmp_path / "exclude", step, msprof_tx=True, mstx_domain_exclude=["other"]))
    assert [d for _, d in exclude] == ["Module", "default"]


def test_flops_counting_is_a_runtime_patch_of_the_registry():
    assert FLOPS_COUNTING in RUNTIME_PATCHES and FLOPS_COUNTING not in PATCHES
    original = torch.mm
    try:
        assert set_runtime_patch(FLOPS_COUNTING, True) is True
        assert torch.mm is not original and torch.mm.__wrapped__ is original
    finally:
        assert set_runtime_patch(FLOPS_COUNTING, False) is True
    assert torch.mm is original and set_runtime_patch(FLOPS_COUNTING, False) is False


@pytest.mark.skipif(importlib.util.find_spec("msprof_analyze") is None, reason="msprof-analyze is not installed")
def test_operator_mfu_divides_each_kernels_flops_by_its_duration_and_the_cards_peak(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 8)).npu()
    x = torch.randn(32, 64, device="npu")
    session = _record(tmp_path / "prof", lambda: model(x), record_flops=True)
    done = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "msprof-analyze"), "-m", "operator_mfu"]
        + ["-d", str(tmp_path / "prof"), "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(tmp_path / "out" / "cluster_analysis_output" / "cluster_analysis.db") as connection:
        rows = connection.execute(
            'SELECT op_name, kernel_name, "kernel_duration(ns)", mfu, flops, flops_op_name FROM OperatorMFU'
        ).fetchall()
    (info,) = glob.glob(os.path.join(session, "PROF_*", "device_*", "info.json.*"))
    device = json.load(open(info))["DeviceInfo"][0]
    peak = device["ai_core_num"] * float(device["aic_frequency"]) * 1e6 * 16 * 16 * 16 * 2
    assert [(op, kernel, flops, name) for op, kernel, _, _, flops, name in rows] == [
        ("aten::addmm", "addmm", 2 * 32 * 64 * 96, "linear"),
        ("aten::addmm", "addmm", 2 * 32 * 96 * 8, "linear"),
    ]
    for _, _, duration, mfu, flops, _ in rows:
        assert mfu == pytest.approx(flops / (duration * 1e-9) / peak, rel=1e-3, abs=1e-4)
