"""The public API against the real torch_npu's schema (the parity tool lives beside the project, in
../shared/tools; a clone without it skips this check)."""

import json
import os
import subprocess
import sys

import pytest

TOOL = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "shared", "tools", "api_parity.py"
)
AREAS = [
    "torch_npu.npu",
    "torch_npu.optim",
    "torch_npu.utils",
    "torch_npu.testing",
    "torch_npu.contrib",
    "torch_npu.profiler",
]


@pytest.mark.skipif(not os.path.isfile(TOOL), reason="../shared/tools/api_parity.py is not beside this checkout")
def test_every_public_name_of_torch_npu_exists_and_the_areas_match_at_90_percent(tmp_path):
    out = tmp_path / "parity.json"
    subprocess.run([sys.executable, TOOL, "--json", str(out)], check=True, capture_output=True, timeout=600)
    rows = json.loads(out.read_text())["rows"]
    assert {area: row["missing"] for area, row in rows.items() if row["missing"]} == {}
    for area in AREAS:
        row = rows[area]
        assert row["present"] / row["total"] >= 0.90, (area, row)
