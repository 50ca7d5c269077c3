"""The profiler's SQLite access at torch_npu's import path: DbManager (connections, tables, inserts in batches,
fetches), EmptyClass (the falsy stand-in for a connection or cursor that could not be made), and the per-process
databases TorchDb (ascend_pytorch_profiler*.db) and AnalysisDb (analysis.db). The profiler's DB export writes its
tables through them."""

import os
import sqlite3

from torch_npu.profiler.analysis.prof_common_func._constant import print_error_msg, print_warn_msg

__all__ = []


class EmptyClass:
    """Falsy and empty: what DbManager returns in place of a connection or cursor it could not create."""

    def __init__(self, info: str = "") -> None:
        self._info = info

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return ""


def _sqlite_error(err):
    print_error_msg(f"SQLite Error: {' '.join(str(a) for a in err.args)}")


class DbManager:
    """SQLite operations on a connection and cursor."""

    INSERT_SIZE = 10000
    FETCH_SIZE = 10000
    MAX_ROW_COUNT = 100000000

    @classmethod
    def create_connect_db(cls, db_path: str) -> tuple:
        """(connection, cursor) of the database at db_path, created if missing; EmptyClass pair on failure."""
        if os.path.exists(db_path) and not os.path.isfile(db_path):
            return EmptyClass("empty conn"), EmptyClass("empty curs")
        try:
            conn = sqlite3.connect(db_path, timeout=2147483, check_same_thread=False)
            return conn, conn.cursor()
        except sqlite3.Error:
            return EmptyClass("empty conn"), EmptyClass("empty curs")

    @classmethod
    def destroy_db_connect(cls, conn, cur) -> None:
        if not conn or not cur:
            return
        try:
            cur.close()
        except sqlite3.Error as err:
            raise RuntimeError("Failed to close db connection cursor") from err
        try:
            conn.close()
        except sqlite3.Error as err:
            raise RuntimeError("Failed to close db connection") from err

    @classmethod
    def execute_sql(cls, conn, sql: str) -> bool:
        return cls._committed(conn, lambda cursor: cursor.execute(sql))

    @classmethod
    def executemany_sql(cls, conn, sql: str, param) -> bool:
        return cls._committed(conn, lambda cursor: cursor.executemany(sql, param))

    @staticmethod
    def _committed(conn, statement) -> bool:
        """Run statement on a new cursor and commit; False (the error printed) when SQLite refuses it."""
        try:
            statement(conn.cursor())
            conn.commit()
            return True
        except sqlite3.Error as err:
            _sqlite_error(err)
            return False

    @classmethod
    def judge_table_exist(cls, cur, table_name: str) -> bool:
        try:
            cur.execute("SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?", (table_name,))
            return bool(cur.fetchone()[0])
        except sqlite3.Error as err:
            raise RuntimeError("Failed to judge table in db file") from err

    @classmethod
    def create_table_with_headers(cls, conn, cur, table_name: str, headers: list) -> None:
        """Create table_name with headers [(column, type), ...] unless it exists."""
        if cls.judge_table_exist(cur, table_name):
            return
        columns = ", ".join(f"{name} {kind}" for name, kind in headers)
        if not cls.execute_sql(conn, f"CREATE TABLE IF NOT EXISTS {table_name} ({columns})"):
            raise RuntimeError("Failed to create table in profiler db file")

    @classmethod
    def insert_data_into_table(cls, conn, table_name: str, data: list) -> None:
        """Insert the rows of data, INSERT_SIZE rows per statement batch."""
        if not data:
            return
        sql = f"INSERT INTO {table_name} VALUES ({', '.join('?' * len(data[0]))})"
        for start in range(0, len(data), cls.INSERT_SIZE):
            if not cls.executemany_sql(conn, sql, data[start : start + cls.INSERT_SIZE]):
                raise RuntimeError("Failed to insert data into profiler db file")

    @classmethod
    def clear_table_data(cls, conn, cur, table_name: str) -> None:
        """Delete every row of table_name, keeping the table."""
        if not table_name or not cls.judge_table_exist(cur, table_name):
            return
        if not cls.execute_sql(conn, f"DELETE FROM {table_name}"):
            raise RuntimeError(f"Failed to clear data from table {table_name}")

    @classmethod
    def fetch_all_data(cls, cur, sql: str) -> list:
        """Every row of the query, FETCH_SIZE at a time, stopping (with a warning) past MAX_ROW_COUNT."""
        data = []
        try:
            cur.execute(sql)
            while True:
                rows = cur.fetchmany(cls.FETCH_SIZE)
                data += rows
                if len(data) > cls.MAX_ROW_COUNT:
                    print_warn_msg("The record counts in table exceed the limit!")
                    break
                if len(rows) < cls.FETCH_SIZE:
                    break
            return data
        except sqlite3.Error as err:
            _sqlite_error(err)
            return []

    @classmethod
    def fetch_one_data(cls, cur, sql: str):
        try:
            cur.execute(sql)
            return cur.fetchone()
        except sqlite3.Error as err:
            _sqlite_error(err)
            return []


class BasicDb:
    """One database file, connected on demand."""

    def __init__(self) -> None:
        self.db_path = None
        self.conn = None
        self.curs = None

    def init(self, db_path: str) -> None:
        if self.db_path is None:
            self.db_path = db_path

    def create_connect_db(self) -> bool:
        if self.conn and self.curs:
            return True
        self.conn, self.curs = DbManager.create_connect_db(self.db_path)
        return bool(self.conn and self.curs)

    def get_db_path(self) -> str:
        return self.db_path

    def close(self) -> None:
        self.db_path = None
        DbManager.destroy_db_connect(self.conn, self.curs)
        self.conn = None
        self.curs = None

    def judge_table_exist(self, table_name: str) -> bool:
        return DbManager.judge_table_exist(self.curs, table_name)

    def create_table_with_headers(self, table_name: str, headers: list) -> None:
        DbManager.create_table_with_headers(self.conn, self.curs, table_name, headers)

    def insert_data_into_table(self, table_name: str, data: list) -> None:
        DbManager.insert_data_into_table(self.conn, table_name, data)

    def clear_table_data(self, table_name: str) -> None:
        DbManager.clear_table_data(self.conn, self.curs, table_name)

    def fetch_all_data(self, sql: str) -> list:
        return DbManager.fetch_all_data(self.curs, sql)

    def fetch_one_data(self, sql: str):
        return DbManager.fetch_one_data(self.curs, sql)


class _OnePerProcess(BasicDb):
    _instance = None

    def __new__(cls):
        if cls.__dict__.get("_instance") is None:
            cls._instance = super().__new__(cls)
            BasicDb.__init__(cls._instance)
        return cls._instance

    def __init__(self) -> None:  # the instance is set up once, in __new__
        pass


class TorchDb(_OnePerProcess):
    """The process's profiler database (ascend_pytorch_profiler*.db)."""


class AnalysisDb(_OnePerProcess):
    """The process's analysis database (analysis.db)."""
