"""msprof-analyze's cluster analysis of a 2-rank hccl job profiled on vnpu: `-m all` on the text export (the
communication groups, the communication matrix with the bytes the collectives moved, the per-rank step
times) and the analyses that read only the database export (ExportType.Db)."""

import csv
import glob
import importlib.util
import json
import os
import pathlib
import shutil
import sqlite3
import subprocess
import sys

import pytest
from test_distributed import _all_ok, launch

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("msprof_analyze") is None,
    reason="msprof-analyze is not installed (pip install msprof-analyze)",
)
MSPROF_ANALYZE = os.path.join(os.path.dirname(sys.executable), "msprof-analyze")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, once):
    """Two ranks profiled and `msprof-analyze -m all` over them, once per run (the tests only read the results)."""

    def profile_and_analyse():
        root = tmp_path_factory.mktemp("cluster")
        _all_ok(launch("profiled_collectives", 2, extra_env={"PROFILE_DIR": str(root)}))
        done = subprocess.run(
            [MSPROF_ANALYZE, "-m", "all", "-d", str(root)], capture_output=True, text=True, timeout=600, cwd=root
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "does not have valid communication data" not in done.stdout + done.stderr
        return str(root)

    return pathlib.Path(once("msprof-analyze -m all", profile_and_analyse))


def _ops(matrix, prefix):
    """The links of the operators named prefix... in cluster_communication_matrix.json ({group: {step: {op: links}}})."""
    return [
        links
        for steps in matrix.values()
        for ops in steps.values()
        for op, links in ops.items()
        if op.startswith(prefix)
    ]


def test_each_rank_writes_communication_files_and_its_group(cluster):
    sessions = sorted(glob.glob(str(cluster / "*_ascend_pt")))
    assert len(sessions) == 2
    for rank, session in enumerate(sessions):
        out = os.path.join(session, "ASCEND_PROFILER_OUTPUT")
        communication = json.load(open(os.path.join(out, "communication.json")))
        infos = [
            info["Communication Time Info"]
            for step in communication.values()
            for op, info in step["collective"].items()
            if op.startswith("hcom_allReduce_")
        ]
        assert infos and all(i["Elapse Time(ms)"] > 0 for i in infos)
        assert all(i["Elapse Time(ms)"] >= i["Transit Time(ms)"] for i in infos)
        meta = json.load(open(os.path.join(session, "profiler_metadata.json")))
        (group,) = meta["parallel_group_info"].values()
        assert group["global_ranks"] == [0, 1]
        assert os.path.exists(os.path.join(session, f"profiler_info_{rank}.json")) or any(
            os.path.exists(os.path.join(s, f"profiler_info_{rank}.json")) for s in sessions
        )


def test_the_cluster_matrix_reports_the_bytes_each_collective_moved(cluster):
    output = cluster / "cluster_analysis_output"
    groups = json.load(open(output / "communication_group.json"))
    assert groups["collective"] == [[0, 1]]
    matrix = json.load(open(output / "cluster_communication_matrix.json"))
    (allreduce,) = _ops(matrix, "hcom_allReduce_")
    # a 2-rank all_reduce of N bytes sends N bytes each way (ring: 2(n-1)/n of the tensor)
    assert allreduce["0-1"]["Transit Size(MB)"] * 2**20 == 16384 == allreduce["1-0"]["Transit Size(MB)"] * 2**20
    assert allreduce["0-1"]["Transport Type"] == "HCCS" and allreduce["0-1"]["Bandwidth(GB/s)"] > 0
    (send,) = _ops(matrix, "hcom_send_")
    assert send["0-1"]["Transit Size(MB)"] * 2**20 == 1024 and "1-0" not in send


def test_the_cluster_step_times_have_computing_and_communication(cluster):
    with open(cluster / "cluster_analysis_output" / "cluster_step_trace_time.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["Type"] == "rank"]
    assert sorted(r["Index"] for r in rows) == ["0", "1"]
    for row in rows:
        assert float(row["Computing"]) > 0 and float(row["Communication"]) > 0


@pytest.fixture
def db_cluster(tmp_path_factory, once, tmp_path):
    """Four ranks profiled as databases (once per run); rank 3 joins every all_reduce late. Each test analyses its
    own copy: the analyses write into the directory they read."""

    def profile():
        root = tmp_path_factory.mktemp("cluster_db")
        _all_ok(launch("profiled_database", 4, extra_env={"PROFILE_DIR": str(root)}))
        return str(root)

    return pathlib.Path(shutil.copytree(once("profiled_database", profile), tmp_path / "cluster_db"))


@pytest.mark.parametrize(
    "analysis,tables",
    [
        ("compute_op_sum", ["ComputeOpAllRankStats", "ComputeOpPerRankStatsByOpType"]),
        ("hccl_sum", ["HcclAllRankStats", "HcclPerRankStats", "HcclGroupNameMap"]),
        ("communication_group_map", ["CommunicationGroupMapping"]),
        ("cluster_time_summary", ["ClusterTimeSummary"]),
    ],
)
def test_the_database_only_analyses_fill_their_tables(db_cluster, analysis, tables):
    done = subprocess.run(
        [MSPROF_ANALYZE, "-m", analysis, "-d", str(db_cluster)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and "only supports DB" not in done.stdout + done.stderr, done.stdout + done.stderr
    db = sqlite3.connect(db_cluster / "cluster_analysis_output" / "cluster_analysis.db")
    for table in tables:
        assert db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] > 0, table
    if analysis == "hccl_sum":
        kinds = {row[0] for row in db.execute("SELECT OpType FROM HcclAllRankStats")}
        assert "hcom_allReduce" in kinds
    if analysis == "compute_op_sum":
        kinds = {row[0] for row in db.execute("SELECT OpType FROM ComputeOpAllRankStats")}
        assert "MatMulV2" in kinds


def test_slow_rank_finds_the_rank_that_joins_late(db_cluster):
    done = subprocess.run(
        [MSPROF_ANALYZE, "-m", "slow_rank", "-d", str(db_cluster)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    db = sqlite3.connect(db_cluster / "cluster_analysis_output" / "cluster_analysis.db")
    slow = dict(db.execute("SELECT * FROM SlowRank").fetchall())
    assert set(slow) == {3} and slow[3] > 0  # the others wait for rank 3, so its collectives are the short ones
