"""The public API against the real torch_npu's schema (the parity tool lives beside the project, in
../shared/tools; a clone without it skips this check)."""

import importlib.util
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


# Keyword arguments torch_npu added after the schema's snapshot (its own tests call them): a signature that is the
# schema's plus these, at the end with defaults, counts as the schema's.
NEWER_KEYWORDS = {
    "torch_npu.profiler.profile": ("execution_trace_observer",),  # test/profiler/test_npu_execution_trace.py
    "torch_npu.profiler.profiler.profile": ("execution_trace_observer",),
    "torch_npu.profiler._ExperimentalConfig": ("record_flops",),  # the mfu_flops ranges msprof-analyze reads
    "torch_npu.profiler.experimental_config._ExperimentalConfig": ("record_flops",),
}


def _schema_plus_newer_keywords(tool, schema, name):
    ours = tool.params_of_obj(tool.resolve(name)[0])
    newer = [(keyword, True) for keyword in NEWER_KEYWORDS[name]]
    return ours[-len(newer) :] == newer and ours[: -len(newer)] == tool.params_of_text(schema[name]["signature"])


@pytest.mark.skipif(not os.path.isfile(TOOL), reason="../shared/tools/api_parity.py is not beside this checkout")
def test_every_public_name_of_torch_npu_exists_and_the_areas_match_at_90_percent(tmp_path):
    out = tmp_path / "parity.json"
    subprocess.run([sys.executable, TOOL, "--json", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    rows, detail = result["rows"], result["detail"]
    assert {area: row["missing"] for area, row in rows.items() if row["missing"]} == {}
    spec = importlib.util.spec_from_file_location("api_parity", TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    schema = json.load(open(tool.SCHEMA))
    for name in NEWER_KEYWORDS:
        assert detail[name] == "signature differs" and _schema_plus_newer_keywords(tool, schema, name), name
    for area in AREAS:
        row = rows[area]
        extended = sum(1 for name in NEWER_KEYWORDS if name.startswith(area + "."))
        assert (row["present"] + extended) / row["total"] >= 0.90, (area, row)
