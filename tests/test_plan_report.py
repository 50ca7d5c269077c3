"""What `vnpu plan` reports: where the peak happened (operator, module, line), the biggest tensors alive at
the peak (named when they are parameters, gradients or optimizer state), the peaks of every step, and
the report as Markdown, JSON and HTML."""

import json
import textwrap

import pytest
from subprocess_helpers import VNPU, checked, client_env, run

from vnpu import plan_report
from vnpu.report_files import write_report

NET = """
import json, sys, torch, torch.nn as nn, torch_npu

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.wide = nn.Linear(256, 16384)
        self.narrow = nn.Linear(16384, 8)

    def forward(self, x):
        return self.narrow(self.wide(x))
"""

INFERENCE = (
    NET
    + """
model = Net().npu()
with torch.no_grad():
    model(torch.empty(512, 256, device="npu"))
"""
)

TRAINING = (
    NET
    + """
model = Net().npu()
opt = torch.optim.Adam(model.parameters())
measured = []
for step in range(3):
    model(torch.empty(1024 * (step + 1), 256, device="npu")).sum().backward()
    opt.step()
    opt.zero_grad(set_to_none=step < 2)
    measured.append([torch.npu.max_memory_allocated(), torch.npu.max_memory_reserved()])
    torch.npu.reset_peak_memory_stats()
print(json.dumps(measured))
"""
)


def _block(nbytes):
    """The caching allocator's block for a tensor of `nbytes`: torch_npu's 32-byte pad, 512-byte rounding."""
    return (nbytes + 32 + 511) // 512 * 512


def _plan(tmp_path, program, report="plan.json", soc="Ascend910B4"):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(program))
    path = tmp_path / report
    proc = checked(run([*VNPU, "plan", "--soc", soc, "--report", str(path), "--", "python", str(script)], client_env()))
    return proc, path


@pytest.fixture(scope="module")
def inference_plan(tmp_path_factory):
    """INFERENCE planned once for two cards (each plan is a program run): (its output, report path, folder)."""
    folder = tmp_path_factory.mktemp("inference")
    proc, path = _plan(folder, INFERENCE, "plan.json", soc="Ascend910B1,Ascend910B4")
    return proc, path, folder


def test_the_peak_is_placed_at_its_operator_module_and_line_with_the_tensors_alive_then(inference_plan):
    proc, path, tmp_path = inference_plan
    (device,) = json.loads(path.read_text())["devices"]
    # wide's 32 MiB output is still alive when narrow allocates its own: that is the peak.
    assert device["peak_operator"] == "aten::addmm"
    assert device["peak_module"] == "narrow (Linear)"
    assert device["peak_site"] == f"{tmp_path / 'job.py'}:11"
    biggest = device["biggest_at_peak"]
    assert biggest[0] == {
        "bytes": _block(512 * 16384 * 4),
        "operator": "aten::addmm",
        "module": "wide (Linear)",
        "name": "",
    }
    assert biggest[1] == {
        "bytes": _block(16384 * 256 * 4),
        "operator": "aten::_to_copy",
        "module": "",
        "name": "wide.weight",
    }
    assert sum(b["bytes"] for b in biggest) <= device["allocated_bytes.all.peak"]
    assert "aten::addmm in narrow (Linear) at" in proc.stdout
    assert "Biggest tensors alive at the peak (rank 0, npu:0)" in proc.stdout


def test_each_step_has_its_peaks_and_optimizer_state_is_named(tmp_path):
    proc, path = _plan(tmp_path, TRAINING)
    measured = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("[[")))
    (device,) = json.loads(path.read_text())["devices"]
    steps = device["steps"]
    assert len(steps) == 4  # three optimizer steps and what followed the last
    assert [[s["allocated_peak"], s["reserved_peak"]] for s in steps[:3]] == measured
    assert steps[0]["allocated_peak"] < steps[1]["allocated_peak"] < steps[2]["allocated_peak"]
    named = {b["name"]: b for b in device["biggest_at_peak"] if b["name"]}
    assert named["wide.weight"]["operator"] == "aten::_to_copy"
    assert named["wide.weight.exp_avg"]["module"] == "Adam.step"
    assert named["wide.weight.exp_avg_sq"]["operator"] == "aten::zeros_like"
    # The last step's peak comes in backward, while narrow's gradients are made (wide's are not yet).
    assert device["peak_module"] == "backward of narrow (Linear)"
    assert named["narrow.weight.grad"]["module"] == "backward of narrow (Linear)"
    assert "wide.weight.grad" not in named
    assert any(
        b["operator"] == "aten::empty" and b["bytes"] == _block(3072 * 256 * 4) for b in device["biggest_at_peak"]
    )
    for row in ("│ 1 ", "│ 2 ", "│ 3 ", "after step 3"):
        assert row in proc.stdout


def test_the_report_file_is_markdown_json_or_html_by_its_name(inference_plan, tmp_path):
    _, path, _ = inference_plan
    report = json.loads(path.read_text())
    write_report(str(tmp_path / "plan.md"), report, plan_report.markdown)
    write_report(str(tmp_path / "plan.html"), report, plan_report.markdown, title="vnpu plan: job.py")
    text, html = (tmp_path / "plan.md").read_text(), (tmp_path / "plan.html").read_text()
    assert "## Biggest tensors alive at the peak (rank 0, npu:0)" in text
    assert "| 32.00 MiB | - | aten::addmm | wide (Linear) |" in text
    assert html.startswith("<!DOCTYPE html>") and "<title>vnpu plan: job.py</title>" in html
    assert "<h2>Biggest tensors alive at the peak (rank 0, npu:0)</h2>" in html
    assert "<td>32.00 MiB</td>\n<td>-</td>\n<td>aten::addmm</td>\n<td>wide (Linear)</td>" in html
    assert html.count("<table>") == text.count("\n|---|") == 4
    assert "<td>Ascend910B4</td>\n<td>32 GiB</td>\n<td>fits (" in html


CACHED_THEN_BIGGER = """
import torch, torch_npu
x = torch.empty(20 * 2**30, dtype=torch.uint8, device="npu")
del x  # its segment stays cached
y = torch.empty(25 * 2**30, dtype=torch.uint8, device="npu")
"""


def test_a_card_too_small_says_by_how_much_and_where_it_runs_out(tmp_path):
    program = "import torch, torch_npu\nw = torch.empty(40 * 2**30, dtype=torch.uint8, device='npu')\nw.add_(1)\n"
    proc, path = _plan(tmp_path, program, soc="Ascend910B4")  # 32 GiB
    result = json.loads(path.read_text())
    (device,) = result["devices"]
    (verdict,) = result["verdicts"]
    # The run went on past the card: the job's whole need is known, and where the card ran out.
    assert device["reserved_bytes.all.peak"] == 40 * 2**30 + 2 * 2**20 and device["num_ooms"] == 0
    assert device["over_capacity"]["requested"] == 40 * 2**30
    assert not verdict["fits"] and verdict["margin_bytes"] == -(8 * 2**30 + 2 * 2**20)
    assert verdict["runs_out_at"] == f"aten::empty at {tmp_path / 'job.py'}:2"
    expected = f"does not fit by 8.00 GiB; runs out at aten::empty at {tmp_path / 'job.py'}:2"
    assert plan_report.verdict_text(verdict) == expected
    assert "does not fit by 8.00 GiB" in proc.stdout


def test_a_smaller_card_is_planned_again_when_its_cache_could_make_room(tmp_path):
    # On a 64 GiB card both segments stay (45 GiB reserved); a 32 GiB card releases the cached 20 GiB
    # segment for the 25 GiB request, so the job fits there too.
    _, path = _plan(tmp_path, CACHED_THEN_BIGGER, soc="Ascend910B1,Ascend910B4")
    result = json.loads(path.read_text())
    assert result["devices"][0]["reserved_bytes.all.peak"] == 45 * 2**30 + 4 * 2**20
    verdicts = {v["soc"]: v for v in result["verdicts"]}
    assert verdicts["Ascend910B1"]["fits"] and verdicts["Ascend910B4"]["fits"]
    assert verdicts["Ascend910B4"]["margin_bytes"] == 32 * 2**30 - (25 * 2**30 + 2 * 2**20)


def test_a_program_that_fails_gets_no_verdict(tmp_path):
    program = "import torch, torch_npu\nx = torch.empty(8, device='npu')\nif x.sum() > 0:\n    pass\n"
    script = tmp_path / "job.py"
    script.write_text(program)
    path = tmp_path / "plan.json"
    proc = run([*VNPU, "plan", "--report", str(path), "--", "python", str(script)], client_env())
    assert proc.returncode == 1
    assert f"aten::_local_scalar_dense needs them (at {script}:3)" in proc.stderr
    result = json.loads(path.read_text())
    (verdict,) = result["verdicts"]
    assert result["exit_status"] == 1 and verdict["fits"] is None
    assert plan_report.verdict_text(verdict, 1) == "unknown: the program failed (exit status 1) before it finished"
