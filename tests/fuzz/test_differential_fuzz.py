"""The differential fuzzer: CI's fixed-seed slice must agree bit for bit, and the fuzzer itself must
find, minimise and survive planted defects (silent garbage, a crash, a hang)."""

import json
import os
import sys

import pytest

from vnpu.fuzz import campaign, catalogue
from vnpu.fuzz.minimise import minimise
from vnpu.fuzz.program import Program, differential, generate

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def test_ci_slice_of_programs_agrees_bit_for_bit_with_the_cpu():
    report = campaign.run(range(1000), timeout=120)
    assert report.programs == 1000
    assert report.unexpected() == [], [(f.seed, f.kind, f.detail, f.program) for f in report.unexpected()]


def test_programs_are_reproducible_data():
    a, b = generate(7), generate(7)
    assert a.to_json() == b.to_json() and 1 <= len(a.steps) <= 8
    assert max(len(generate(s).steps) for s in range(20)) >= 3
    assert Program.from_json(a.to_json()) == a
    assert generate(8).to_json() != a.to_json()
    assert len({op.name for op in catalogue.OPERATORS}) == len(catalogue.OPERATORS) >= 90


@pytest.fixture
def planted(monkeypatch):
    def use(name):
        monkeypatch.setenv("VNPU_FUZZ_OPERATORS", f"planted_defects:{name}")
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))

    return use


def test_silent_garbage_is_found_and_minimised_to_the_defective_step(planted):
    planted("SILENT_GARBAGE")
    report = campaign.run(range(40), timeout=120)
    assert report.findings and all(f.kind == "value" and not f.expected for f in report.findings)
    for finding in report.findings:
        steps = json.loads(finding.program)["steps"]
        assert [s["op"] for s in steps][-1] == "planted_off_by_one" and len(steps) <= 2


def test_minimise_keeps_the_failure_and_drops_the_rest():
    from planted_defects import SILENT_GARBAGE

    by_name = {op.name: op for op in SILENT_GARBAGE}
    program = Program(
        seed=3,
        inputs=[{"shape": [2, 3], "dtype": "float32", "layout": "transposed", "special": True}],
        steps=[
            {"op": "abs", "args": [0], "params": {}},
            {"op": "neg", "args": [1], "params": {}},
            {"op": "planted_off_by_one", "args": [0], "params": {}},
            {"op": "abs", "args": [3], "params": {}},
        ],
    )
    assert differential(program, by_name)[0] == "value"
    smallest = minimise(program, "value", by_name)
    assert [s["op"] for s in smallest.steps] == ["planted_off_by_one"] and smallest.steps[0]["args"] == [0]
    assert smallest.inputs[0]["layout"] == "contiguous" and smallest.inputs[0]["special"] is False


@pytest.mark.skipif(sys.platform != "linux", reason="abort() and signals as on Linux")
def test_a_crash_is_caught_reported_with_its_program_and_the_campaign_goes_on(planted):
    planted("CRASH")
    report = campaign.run(range(6), timeout=120, minimise=False)
    found = [(f.seed, f.kind, f.detail, f.program) for f in report.findings]
    assert report.programs == 6, found
    crashes = [f for f in report.findings if f.kind == "crash"]
    assert crashes and all("planted_crash" in f.program for f in crashes), found
    assert all("exited with -6" in f.detail for f in crashes), found


def test_a_hang_is_caught_within_the_time_limit(planted):
    planted("HANG")
    report = campaign.run(range(2), timeout=8, minimise=False)
    assert report.programs == 2 and {f.kind for f in report.findings} == {"hang"}
    assert all("planted_hang" in f.program for f in report.findings)
