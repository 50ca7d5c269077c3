"""torch_npu.profiler.analysis.prof_common_func._db_manager: the SQLite access the profiler's DB export writes
through (DbManager, EmptyClass, TorchDb / AnalysisDb), at torch_npu's import path."""

import sqlite3

import pytest

from torch_npu.profiler.analysis.prof_common_func._db_manager import AnalysisDb, DbManager, EmptyClass, TorchDb


def test_tables_are_created_once_filled_in_batches_fetched_and_cleared(tmp_path, monkeypatch):
    conn, curs = DbManager.create_connect_db(str(tmp_path / "a.db"))
    headers = [("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")]
    assert not DbManager.judge_table_exist(curs, "T")
    DbManager.create_table_with_headers(conn, curs, "T", headers)
    DbManager.create_table_with_headers(conn, curs, "T", headers)  # exists: left as it is
    assert DbManager.judge_table_exist(curs, "T")
    monkeypatch.setattr(DbManager, "INSERT_SIZE", 3)
    rows = [(i, f"n{i}") for i in range(8)]
    calls = []
    executemany = DbManager.executemany_sql.__func__
    monkeypatch.setattr(
        DbManager, "executemany_sql", classmethod(lambda c, *a: calls.append(len(a[2])) or executemany(c, *a))
    )
    DbManager.insert_data_into_table(conn, "T", rows)
    assert calls == [3, 3, 2]
    DbManager.insert_data_into_table(conn, "T", [])  # nothing to insert
    monkeypatch.setattr(DbManager, "FETCH_SIZE", 3)
    assert DbManager.fetch_all_data(curs, "SELECT * FROM T ORDER BY id") == rows
    assert DbManager.fetch_one_data(curs, "SELECT count(*) FROM T") == (8,)
    DbManager.clear_table_data(conn, curs, "T")
    assert DbManager.fetch_one_data(curs, "SELECT count(*) FROM T") == (0,)
    assert DbManager.judge_table_exist(curs, "T")
    DbManager.destroy_db_connect(conn, curs)
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")


def test_failures_are_reported_and_never_raise_from_queries(tmp_path, capsys):
    conn, curs = DbManager.create_connect_db(str(tmp_path))  # a directory is no database
    assert isinstance(conn, EmptyClass) and not conn and not curs and str(conn) == ""
    DbManager.destroy_db_connect(conn, curs)  # nothing to close
    conn, curs = DbManager.create_connect_db(str(tmp_path / "b.db"))
    assert DbManager.fetch_all_data(curs, "SELECT * FROM missing") == []
    assert DbManager.fetch_one_data(curs, "SELECT * FROM missing") == []
    assert not DbManager.execute_sql(conn, "CREATE TABLE (")
    out = capsys.readouterr().out
    assert out.count("[ERROR]") == 3 and "SQLite Error: no such table: missing" in out, out
    with pytest.raises(RuntimeError, match="^Failed to insert data into profiler db file$"):
        DbManager.insert_data_into_table(conn, "missing", [(1,)])


def test_torch_and_analysis_databases_are_one_per_process(tmp_path):
    db = TorchDb()
    assert TorchDb() is db and AnalysisDb() is AnalysisDb() and AnalysisDb() is not db
    db.init(str(tmp_path / "t.db"))
    db.init(str(tmp_path / "other.db"))  # the first path stays until close()
    assert db.get_db_path() == str(tmp_path / "t.db") and db.create_connect_db() and db.create_connect_db()
    db.create_table_with_headers("X", [("v", "INTEGER")])
    db.insert_data_into_table("X", [(1,), (2,)])
    assert db.fetch_all_data("SELECT v FROM X") == [(1,), (2,)] and db.judge_table_exist("X")
    db.clear_table_data("X")
    assert db.fetch_one_data("SELECT count(*) FROM X") == (0,)
    db.close()
    assert db.get_db_path() is None and db.conn is None


def test_each_refusal_names_what_failed(tmp_path):
    from torch_npu.profiler import db_export

    conn, curs = DbManager.create_connect_db(str(tmp_path / "c.db"))
    with pytest.raises(RuntimeError, match="^Failed to create table in profiler db file$"):
        DbManager.create_table_with_headers(conn, curs, "T", [("id", "INTEGER PRIMARY KEY PRIMARY KEY")])
    DbManager.create_table_with_headers(conn, curs, "T", [("id", "INTEGER")])
    DbManager.destroy_db_connect(conn, curs)
    read_only = sqlite3.connect(f"file:{tmp_path / 'c.db'}?mode=ro", uri=True)
    with pytest.raises(RuntimeError, match="^Failed to clear data from table T$"):
        DbManager.clear_table_data(read_only, read_only.cursor(), "T")
    closed = read_only.cursor()
    read_only.close()
    with pytest.raises(RuntimeError, match="^Failed to judge table in db file$"):
        DbManager.judge_table_exist(closed, "T")
    missing = str(tmp_path / "no" / "such" / "dir" / "p.db")
    with pytest.raises(RuntimeError, match=f"^Failed to create the profiler db file {missing}$"):
        db_export._write(TorchDb(), missing, {}, {})
    assert TorchDb().get_db_path() == missing  # set by init; a later export sets its own after close()
    TorchDb().close()
