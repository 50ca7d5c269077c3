"""torch_npu.profiler.profile.export_memory_timeline: PyTorch's memory timeline of an npu training step, the same
as PyTorch's own profiler gives for the same program; torch_npu's warnings when the session cannot have one."""

import gzip
import json

import pytest
import torch

import torch_npu

FULL = {"record_shapes": True, "profile_memory": True, "with_stack": True}


def _train(steps=2):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(8, 16, device="npu")

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()

    return step


def _npu_profile(step, **kwargs):
    with torch_npu.profiler.profile(activities=[torch_npu.profiler.ProfilerActivity.CPU], **kwargs) as prof:
        step()
        step()
    return prof


def _raw_events(path):
    with gzip.open(path, "rt") as f:
        return [tuple(event[1:]) for event in json.load(f)]  # (action, bytes, category): times differ per run


def test_memory_events_equal_pytorchs_for_the_same_program(tmp_path):
    prof = _npu_profile(_train(), **FULL)
    prof.export_memory_timeline(str(tmp_path / "npu.raw.json.gz"), device="npu:0")
    step = _train()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], **FULL) as reference:
        step()
        step()
    with pytest.warns(FutureWarning):
        reference.export_memory_timeline(str(tmp_path / "torch.raw.json.gz"), device="npu:0")
    events = _raw_events(tmp_path / "npu.raw.json.gz")
    assert len(events) > 20 and events == _raw_events(tmp_path / "torch.raw.json.gz")
    prof.export_memory_timeline(str(tmp_path / "npu.json"), device="npu:0")
    times, sizes = json.loads((tmp_path / "npu.json").read_text())
    assert len(times) == len(sizes) > 10 and max(max(row) for row in sizes) > 0


def test_raw_gzip_and_html_by_suffix(tmp_path):
    prof = _npu_profile(_train(), record_shapes=True, profile_memory=True, with_modules=True)
    prof.export_memory_timeline(str(tmp_path / "mem.raw.json.gz"))  # device defaults to npu:0
    assert _raw_events(tmp_path / "mem.raw.json.gz")
    prof.export_memory_timeline(str(tmp_path / "mem.json.gz"))
    with gzip.open(tmp_path / "mem.json.gz", "rt") as f:
        assert len(json.load(f)) == 2
    pytest.importorskip("matplotlib", reason="the HTML plot needs matplotlib")
    prof.export_memory_timeline(str(tmp_path / "mem.html"))
    assert "<img" in (tmp_path / "mem.html").read_text()


@pytest.mark.parametrize(
    "kwargs, missing",
    [
        ({}, "record_shapes=True, profile_memory=True, with_stack=True or with_modules=True"),
        ({"record_shapes": True, "profile_memory": True}, "with_stack=True or with_modules=True"),
        ({"profile_memory": True, "with_stack": True}, "record_shapes=True"),
    ],
)
def test_a_session_without_what_the_timeline_needs_warns_and_writes_nothing(tmp_path, capsys, kwargs, missing):
    prof = _npu_profile(_train(), **kwargs)
    prof.export_memory_timeline(str(tmp_path / "mem.json"))
    assert "[WARNING] [" in capsys.readouterr().out
    assert not (tmp_path / "mem.json").exists()
    prof.export_memory_timeline(str(tmp_path / "mem.json"))
    assert capsys.readouterr().out.rstrip().endswith(f"profiler.py: {missing} required for memory profiling.")


def test_a_profiler_without_a_host_recording_has_no_timeline(tmp_path, capsys):
    never_started = torch_npu.profiler.profile(**FULL)
    never_started.export_memory_timeline(str(tmp_path / "never.json"))
    assert capsys.readouterr().out.rstrip().endswith("profiler.py: Invalid profiling path.")
    with torch_npu.profiler.profile(activities=[torch_npu.profiler.ProfilerActivity.NPU], **FULL) as device_only:
        _train()()
    capsys.readouterr()
    device_only.export_memory_timeline(str(tmp_path / "device.json"))
    assert capsys.readouterr().out.rstrip().endswith("profiler.py: Invalid profiling path.")
    assert not (tmp_path / "never.json").exists() and not (tmp_path / "device.json").exists()
