"""Profiling from the command line: seed 000's `msprof --application="python train.py" --output=DIR` and
`msprof --analyze=DIR --format=html`, `vnpu profile -- ...` and `vnpu profile report`; the HTML report's
sections and numbers; the report rendered by headless Chromium (screenshot checked for its charts)."""

import csv
import glob
import os
import re
import shutil
import subprocess
import sys

import numpy
import pytest
from subprocess_helpers import VNPU, run

from torch_npu.profiler import report, roofline
from vnpu import cli, msprof

TRAIN = """
import sys
import torch
import torch_npu

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(8 * 14 * 14, 10)).npu()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(4):
    loss = model(torch.randn(8, 3, 16, 16).npu()).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""
MSPROF = [sys.executable, "-m", "vnpu.msprof"]


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("VNPU_PROFILE")}
    env["VNPU_OPS_PROFILE"] = "none"
    return env


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """train.py profiled with the seed's command, from its own directory."""
    work = tmp_path_factory.mktemp("msprof")
    (work / "train.py").write_text(TRAIN)
    done = run(
        MSPROF + ["--application=python train.py 3", "--output=./prof_data"],
        dict(_env(), PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]),
        cwd=str(work),
    )
    return work, done


def test_msprof_application_profiles_the_program_as_written(profiled):
    work, done = profiled
    assert done.returncode == 3, done.stderr  # the application's exit status
    assert "trained" in done.stdout
    (session,) = glob.glob(str(work / "prof_data" / "*_ascend_pt"))
    assert re.fullmatch(r".+_\d+_\d{17}_ascend_pt", os.path.basename(session))
    assert f"msprof: profiling data in {session}" in done.stderr
    out = os.path.join(session, "ASCEND_PROFILER_OUTPUT")
    for name in (
        "trace_view.json",
        "kernel_details.csv",
        "operator_details.csv",
        "op_statistic.csv",
        "step_trace_time.csv",
        "memory_record.csv",
        "operator_memory.csv",
        "npu_module_mem.csv",
    ):
        assert os.path.isfile(os.path.join(out, name)), name
    with open(os.path.join(out, "step_trace_time.csv")) as f:
        steps = [r["Step"] for r in csv.DictReader(f)]
    assert steps == ["0", "1", "2", "3", "4"]  # four optimizer steps mark the step boundaries
    with open(os.path.join(out, "kernel_details.csv")) as f:
        kernels = list(csv.DictReader(f))
    assert (
        sum(k["Name"] == "convolution" and k["Type"] == "Conv2D" for k in kernels) == 4 and "Input Shapes" in kernels[0]
    )


def test_msprof_analyze_writes_the_html_report(profiled):
    work, _ = profiled
    done = run(MSPROF + ["--analyze=./prof_data", "--format=html"], _env(), cwd=str(work))
    assert done.returncode == 0, done.stderr
    (page,) = glob.glob(str(work / "prof_data" / "*_ascend_pt" / "report.html"))
    html = open(page).read()
    for section in ("top-operators", "steps", "fallbacks", "memory", "hints"):
        assert f"id='{section}'" in html
    assert (
        html.count("<svg") >= 3
        and "<script" not in html
        and "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )  # self-contained, offline
    assert "estimated on Ascend910B1 (us)" in html and "ESTIMATE" in html


def test_report_numbers_match_the_csv_files(profiled):
    work, _ = profiled
    (session,) = glob.glob(str(work / "prof_data" / "*_ascend_pt"))
    summary = report.summarize(session)
    with open(os.path.join(session, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv")) as f:
        kernels = list(csv.DictReader(f))
    assert summary["kernels"] == len(kernels)
    conv = next(o for o in summary["ops"] if o["op"] == "convolution")
    assert conv["count"] == 4 and conv["total_us"] == pytest.approx(
        sum(float(k["Duration(us)"]) for k in kernels if k["Name"] == "convolution")
    )
    assert summary["ops"] == sorted(summary["ops"], key=lambda o: -o["total_us"])
    hints = report._hints(summary)
    assert any(h.startswith("Long first step: step 0 took") for h in hints)  # interpreter start-up in step 0


def test_roofline_estimates_follow_the_model():
    soc, tflops, gbps = roofline.soc_peaks("Ascend910B1")
    assert (soc, tflops, gbps) == ("Ascend910B1", 414.0, 1600.0)
    # fp16 mm 4096^3: compute-bound, 2*4096^3 / 414e12 s
    mm = roofline.estimate_us(
        "mm", "4096,4096;4096,4096", "c10::Half;c10::Half", "4096,4096", "c10::Half", tflops, gbps
    )
    assert mm == pytest.approx(2 * 4096**3 / 414e12 * 1e6 + roofline.LAUNCH_US)
    # fp32 add of 1M elements: memory-bound, 3 * 4 MiB over the HBM bandwidth
    add = roofline.estimate_us("add", "1048576;1048576", "float;float", "1048576", "float", tflops, gbps)
    assert add == pytest.approx(3 * 4 * 2**20 / 1600e9 * 1e6 + roofline.LAUNCH_US)
    assert roofline.estimate_us("add", "", "", "", "", tflops, gbps) is None


def test_vnpu_profile_runs_a_command_and_reports(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    done = run(
        VNPU + ["profile", "-o", str(tmp_path / "out"), "--profile-memory", "--", sys.executable, "train.py"],
        _env(),
        cwd=str(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    (page,) = glob.glob(str(tmp_path / "out" / "*_ascend_pt" / "report.html"))
    assert f"vnpu profile: report in {page}" in done.stderr
    again = run(VNPU + ["profile", "report", os.path.dirname(page), "-o", str(tmp_path / "r.html")], _env())
    assert again.returncode == 0 and (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--format=pdf", "--analyze=."], "--format pdf is not supported; use --format=html"),
        ([], 'give either --application="python train.py" (collect) or --analyze=DIR (report)'),
        (["--application=python 'unclosed"], "--application cannot be parsed: No closing quotation"),
    ],
)
def test_msprof_refuses_bad_arguments(args, message, capsys):
    with pytest.raises(SystemExit) as done:
        msprof.main(args)
    assert done.value.code == 2 and capsys.readouterr().err.strip().endswith(f"msprof: error: {message}")


def test_profile_command_errors(tmp_path, capsys):
    def run_cli(argv):
        status = cli.main(argv)
        return status, capsys.readouterr().err.strip()

    assert run_cli(["profile", "report", str(tmp_path / "none")]) == (
        2,
        f"vnpu profile report: no such directory: {tmp_path / 'none'}",
    )
    assert run_cli(["profile", "report", str(tmp_path)]) == (
        2,
        f"vnpu profile report: no profiling sessions (<worker>_<timestamp>_ascend_pt directories) in {tmp_path}",
    )
    with pytest.raises(SystemExit) as helped:
        cli.main(["profile", "--help"])
    assert helped.value.code == 0 and "usage: vnpu profile" in capsys.readouterr().out
    assert run_cli(["profile", "--"]) == (
        2,
        "vnpu profile: no program to profile; give it after --, e.g. vnpu profile -- python train.py",
    )
    assert run_cli(["profile", "-o", str(tmp_path), "--", "no-such-program-xyz"]) == (
        127,
        "vnpu profile: cannot run no-such-program-xyz: no such program",
    )
    two = [tmp_path / "a_1_ascend_pt" / "FRAMEWORK", tmp_path / "b_2_ascend_pt" / "FRAMEWORK"]
    for d in two:
        d.mkdir(parents=True)
        (d / "vnpu_profiler_data.json").write_text("{}")
    status, err = run_cli(["profile", "report", str(tmp_path), "-o", str(tmp_path / "x.html")])
    assert status == 2 and err == (
        f"vnpu profile report: 2 sessions in {tmp_path}; -o names one file, so omit it "
        "to write report.html into each session"
    )


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium on this machine (.ci/run installs Debian's chromium; "
    "apt-get install chromium to run this test)",
)
def test_the_report_renders_in_headless_chromium_with_its_charts(profiled, tmp_path):
    from PIL import Image

    work, _ = profiled
    page = glob.glob(str(work / "prof_data" / "*_ascend_pt" / "report.html"))
    if not page:
        page = [report.write_report(glob.glob(str(work / "prof_data" / "*_ascend_pt"))[0])]
    shot = tmp_path / "report.png"
    flags = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--hide-scrollbars",
    ]
    subprocess.run(
        flags + ["--window-size=1100,2000", f"--screenshot={shot}", "file://" + page[0]],
        capture_output=True,
        timeout=120,
        check=True,
    )
    dom = subprocess.run(
        flags + ["--dump-dom", "file://" + page[0]], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert dom.count("<svg") >= 3 and "Top operators by device time" in dom
    image = Image.open(shot).convert("RGB")
    assert image.size == (1100, 2000)
    pixels = numpy.asarray(image).reshape(-1, 3).astype(int)

    def count(rgb):
        return int((abs(pixels - numpy.array(rgb)).max(axis=1) <= 8).sum())

    assert count((0x2F, 0x6F, 0xDF)) > 2000  # the blue operator bars and computing segments were drawn
    assert count((0xB8, 0xBE, 0xC6)) > 500  # the grey free-time segments
    assert count((0xD6, 0x33, 0x6C)) > 100  # the reserved-memory line
