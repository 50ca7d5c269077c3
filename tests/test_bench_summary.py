"""bench/summary.py: every benchmark's results in one table, with each case against its bar."""

import importlib.util
import json
import os

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
spec = importlib.util.spec_from_file_location("bench_summary", os.path.join(BENCH, "summary.py"))
summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(summary)


def _results(tmp_path):
    (tmp_path / "overhead.json").write_text(
        json.dumps(
            {
                "results": {
                    "a + 1 (10 elements)": {"ratio": 1.3, "bar": 1.15},
                    "import torch_npu (s)": {"seconds": 0.2, "bar": 0.5},
                }
            }
        )
    )
    (tmp_path / "migrate.json").write_text(json.dumps({"files": 10, "seconds": 3.0, "bar_seconds": 60.0}))
    return tmp_path


def test_rows_are_read_from_each_results_file_and_judged_against_their_bars(tmp_path):
    rows, missing = summary.collect(str(_results(tmp_path)))
    assert [(r["case"], r["met"]) for r in rows] == [
        ("a + 1 (10 elements), npu / cpu", False),
        ("import torch_npu", True),
        ("vnpu migrate, 10 files", True),
    ]
    assert "distributed.json" in missing and "overhead.json" not in missing


def test_every_results_file_the_benchmarks_write_has_a_reader():
    written = {f for f in os.listdir(os.path.join(BENCH, "results")) if f.endswith(".json") and f != "summary.json"}
    assert written <= set(summary.READERS), written - set(summary.READERS)
    rows, missing = summary.collect()
    assert rows and not (set(missing) & written)


def test_the_readme_table_is_written_between_the_markers_only(tmp_path):
    rows, _ = summary.collect(str(_results(tmp_path)))
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{summary.START}\nold table\n{summary.END}\noutro\n")
    summary.write_readme(str(readme), rows, summary.HEADERS["README.md"])
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old table" not in text
    assert "| `overhead` | a + 1 (10 elements), npu / cpu | **1.300** | ≤ 1.150 | ✗ |" in text
    assert "| `migrate` | vnpu migrate, 10 files | **3.00 s** | ≤ 60.00 s | ✓ |" in text
    bare = tmp_path / "bare.md"
    bare.write_text("no markers\n")
    with pytest.raises(SystemExit, match="markers"):
        summary.write_readme(str(bare), rows, summary.HEADERS["README.md"])
    assert bare.read_text() == "no markers\n"


def test_the_project_readmes_carry_the_generated_tables():
    rows, _ = summary.collect()
    for readme, headers in summary.HEADERS.items():
        with open(os.path.join(os.path.dirname(BENCH), readme), encoding="utf-8") as f:
            assert summary.table(rows, headers) in f.read(), f"{readme}: run python bench/summary.py"


def test_the_chart_is_an_svg(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (the bench extra) draws the chart")
    rows, _ = summary.collect(str(_results(tmp_path)))
    path = tmp_path / "summary.svg"
    assert summary.chart(rows, None, str(path))
    assert path.read_text().lstrip().startswith("<?xml") and "<svg" in path.read_text()


def test_run_all_refuses_a_benchmark_it_does_not_know():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, os.path.join(BENCH, "run_all.py"), "overhead", "nosuch"], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "unknown benchmark(s) nosuch; known: overhead, graphs, fusion_attention" in done.stderr


def test_seconds_within_five_milliseconds_of_zero_read_as_zero():
    assert summary._fmt(-0.004, "s") == "0.00 s" and summary._fmt(0.004, "s") == "0.00 s"
    assert summary._fmt(-0.006, "s") == "-0.01 s" and summary._fmt(0.246, "s") == "0.25 s"
    assert summary._fmt(1.0824, "ratio") == "1.082"
