"""CUDA programs (tests/fixtures/cuda_project) run unchanged with `vnpu run`, and again after
`vnpu migrate`, with the results of the same programs on the CPU; the migration reports match the
expected CSVs; migrating twice changes nothing more; files that do not parse are reported and skipped."""

import csv
import filecmp
import json
import os
import shutil
import sys

import pytest
from subprocess_helpers import VNPU, free_port, run

PROJECT = os.path.join(os.path.dirname(__file__), "fixtures", "cuda_project")
EXPECTED = os.path.join(os.path.dirname(__file__), "fixtures")
PROGRAMS = ["train.py", "train_amp.py", "streams_memory.py", "configured.py", "ddp_nccl.py"]


def _env(**extra):
    env = dict(os.environ, VNPU_OPS_PROFILE="none", FIXTURE_PORT=str(free_port()))
    env.pop("FIXTURE_DEVICE", None)
    env.update(extra)
    return env


def _result(done):
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _comparable(name, result):
    result = dict(result)
    result.pop("device_type", None)  # configured.py reports the device type it was given
    result.pop("backend", None)  # ddp_nccl.py: hccl on npu, gloo for the CPU reference
    if name == "train_amp.py":
        result.pop("scale", None)  # the CPU reference runs without a GradScaler
    if name == "streams_memory.py":
        # c.double().sum(): the card has no float64, so on npu .double() stays float32 (torch_npu's rule) and
        # the sum is a float32 one; it agrees with the CPU's float64 sum to float32 precision
        result["checksum"] = float(f"{result['checksum']:.5g}")
    return result


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("migrated") / "project_npu")
    done = run(VNPU + ["migrate", PROJECT, "-o", out, "--quiet"], _env())
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.mark.parametrize("program", PROGRAMS)
def test_cuda_program_runs_unchanged_and_migrated_like_on_cpu(program, migrated):
    cpu = _result(run([sys.executable, program], _env(FIXTURE_DEVICE="cpu"), cwd=PROJECT))
    unchanged = _result(run(VNPU + ["run", program], _env(), cwd=PROJECT))
    after = _result(run([sys.executable, program], _env(), cwd=migrated))
    assert _comparable(program, unchanged) == _comparable(program, cpu)
    if program == "ddp_nccl.py":  # nccl became hccl, unchanged (vnpu run) and migrated alike
        assert unchanged["backend"] == after["backend"] == "hccl"
    assert (
        after == unchanged
        if program != "configured.py"
        else _comparable(program, after) == _comparable(program, unchanged)
    )


def test_migration_reports_match_the_expected_csvs(migrated):
    for name in ("change_list.csv", "unsupported_api.csv"):
        with (
            open(os.path.join(migrated, name), newline="") as got,
            open(os.path.join(EXPECTED, f"expected_{name}"), newline="") as want,
        ):
            assert list(csv.reader(got)) == list(csv.reader(want)), name


def test_migrated_code_keeps_comments_and_formatting(migrated):
    text = open(os.path.join(migrated, "train.py")).read()
    assert "# the CPU reference run sets FIXTURE_DEVICE=cpu" in text and "import torch_npu\n" in text
    text = open(os.path.join(migrated, "ddp_nccl.py")).read()
    assert 'backend="hccl" if DEVICE == "npu"' in text and "layer.npu()" in text and "torch.npu.set_device" in text
    assert open(os.path.join(migrated, "configs", "run.yaml")).read() == (
        "# training configuration\ndevice: npu:0\nbackend: hccl\nbatch_size: 8\n"
    )


def test_migrating_twice_changes_nothing_more(migrated, tmp_path):
    again = str(tmp_path / "again")
    done = run(VNPU + ["migrate", migrated, "-o", again, "--quiet"], _env())
    assert done.returncode == 0, done.stdout + done.stderr
    for root, _, files in os.walk(migrated):
        for name in files:
            if name.endswith(".csv"):
                continue
            rel = os.path.relpath(os.path.join(root, name), migrated)
            assert filecmp.cmp(os.path.join(migrated, rel), os.path.join(again, rel), shallow=False), rel
    assert list(csv.reader(open(os.path.join(again, "change_list.csv")))) == [["file", "line", "before", "after"]]


def test_files_that_do_not_parse_are_reported_and_the_rest_continue(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "broken.py").write_text("import torch\nx = torch.ones(2).cuda(\n")
    (src / "fine.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    done = run(VNPU + ["migrate", str(src), "--quiet"], _env())
    assert done.returncode == 0 and "skipped broken.py" in done.stdout
    out = tmp_path / "src_npu"
    assert (out / "broken.py").read_text() == (src / "broken.py").read_text()
    assert (out / "fine.py").read_text() == "import torch\nimport torch_npu\nx = torch.ones(2).npu()\n"
    rows = list(csv.reader(open(out / "unsupported_api.csv")))
    assert rows[1][0] == "broken.py" and rows[1][2] == "<syntax error>"


def test_in_place_keeps_backups_and_refuses_an_existing_output(tmp_path):
    src = tmp_path / "proj"
    shutil.copytree(PROJECT, src)
    original = (src / "train.py").read_text()
    done = run(VNPU + ["migrate", str(src), "--in-place", "--quiet"], _env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert (src / ".vnpu_backup" / "train.py").read_text() == original
    assert "model.npu()" in (src / "train.py").read_text()
    assert (src / ".vnpu_migration" / "change_list.csv").exists()
    again = run(VNPU + ["migrate", str(src), "--in-place", "--quiet"], _env())
    assert again.returncode == 0 and (src / ".vnpu_backup" / "train.py").read_text() == original
    exists = run(VNPU + ["migrate", str(src), "-o", str(src), "--quiet"], _env())
    assert exists.returncode == 2 and "already exists" in exists.stdout


def test_command_line_mistakes_are_refused_with_their_reason(tmp_path):
    both = run(VNPU + ["migrate", PROJECT, "-o", str(tmp_path / "x"), "--in-place"], _env())
    assert both.returncode == 2 and "vnpu migrate: -o and --in-place exclude each other" in both.stdout
    missing = run(VNPU + ["migrate", str(tmp_path / "nope")], _env())
    assert missing.returncode == 2 and f"vnpu migrate: no such file or directory: {tmp_path / 'nope'}" in missing.stdout
    report = run(VNPU + ["run", "--report", str(tmp_path / "r.txt"), os.path.join(PROJECT, "train.py")], _env())
    assert (
        report.returncode == 2
        and f"vnpu run: --report must end in .md, .json or .html, got {tmp_path / 'r.txt'}" in report.stderr
    )
