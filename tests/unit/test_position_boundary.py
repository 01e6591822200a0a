"""shared.positions.check_boundary: a start must be where a transaction begins (a fake
cursor answers as MariaDB 10.11 and MySQL 8 do; the real server: test_positions.py)."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from shared.errors import ConflictError
from shared.model import BinlogPosition
from shared.positions import check_boundary

# binlog.000001 as MariaDB writes it: two transactions
MARIADB = [(4, "Format_desc", "Server ver: 10.11"), (256, "Gtid_list", "[]"),
           (285, "Binlog_checkpoint", "binlog.000001"), (1747, "Gtid", "BEGIN GTID 0-11-9"),
           (1789, "Annotate_rows", "INSERT ..."), (1851, "Table_map", "table_id: 18"),
           (1908, "Write_rows_v1", "table_id: 18 flags: STMT_END_F"),
           (1951, "Xid", "COMMIT /* xid=13 */"), (1982, "Gtid", "BEGIN GTID 0-11-10"),
           (2024, "Query", "ALTER TABLE t ADD c INT")]
MYSQL = [(4, "Format_desc", "Server ver: 8.0"), (126, "Previous_gtids", ""),
         (157, "Anonymous_Gtid", "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'"),
         (236, "Query", "BEGIN"), (311, "Table_map", "t"), (360, "Write_rows", "t"),
         (400, "Xid", "COMMIT"), (431, "Gtid", "SET @@SESSION.GTID_NEXT= 'x:1'"),
         (510, "Query", "CREATE TABLE u (a INT)")]
MYSQL56 = [(4, "Format_desc", "Server ver: 5.6"), (120, "Query", "BEGIN"),
           (190, "Query", "INSERT INTO t VALUES (1)"), (290, "Xid", "COMMIT"),
           (321, "Query", "BEGIN")]
SIZE = 2208


class Binlog:
    """Answers SHOW BINARY LOGS, SHOW BINLOG EVENTS and VERSION() from a list of events."""

    def __init__(self, events: list[tuple[int, str, str]], version: str) -> None:
        self.events, self.version, self.rows = events, version, []

    def execute(self, sql: str, args: Any = None) -> None:
        if sql == "SHOW BINARY LOGS":
            self.rows = [("binlog.000001", SIZE)]
        elif sql == "SELECT VERSION()":
            self.rows = [(self.version,)]
        else:
            assert sql.startswith("SHOW BINLOG EVENTS IN"), sql
            file, pos, limit = args
            starts = [event[0] for event in self.events]
            if pos not in starts and pos != SIZE:
                raise pymysql.err.InternalError(1220, "Error when executing command SHOW "
                                                "BINLOG EVENTS: Wrong offset or I/O error")
            self.rows = [(file, at, kind, 11, at + 1, info) for at, kind, info in
                         self.events if at >= pos][:limit]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def fetchone(self) -> tuple[Any, ...]:
        return self.rows[0]


@pytest.mark.parametrize(("events", "version", "pos"), [
    (MARIADB, "10.11.19-MariaDB-log", 4), (MARIADB, "10.11.19-MariaDB-log", 285),
    (MARIADB, "10.11.19-MariaDB-log", 1747), (MARIADB, "10.11.19-MariaDB-log", 1982),
    (MARIADB, "10.11.19-MariaDB-log", SIZE), (MYSQL, "8.0.36", 157), (MYSQL, "8.0.36", 431),
    (MYSQL, "8.0.36", 126), (MYSQL56, "5.6.51-log", 120), (MYSQL56, "5.6.51-log", 321),
])
def test_a_transactions_start_is_taken(events: list[tuple[int, str, str]], version: str,
                                       pos: int) -> None:
    check_boundary(Binlog(events, version), BinlogPosition("binlog.000001", pos), "src")


@pytest.mark.parametrize(("events", "version", "pos", "kind", "after"), [
    (MARIADB, "10.11.19-MariaDB-log", 1789, "Annotate_rows", 1982),
    (MARIADB, "10.11.19-MariaDB-log", 1851, "Table_map", 1982),
    (MARIADB, "10.11.19-MariaDB-log", 1951, "Xid", 1982),
    (MARIADB, "10.11.19-MariaDB-log", 2024, "Query", None),  # after its GTID event
    (MYSQL, "8.0.36", 236, "Query", 431),  # BEGIN after its Anonymous_Gtid
    (MYSQL, "8.0.36", 311, "Table_map", 431),
    (MYSQL56, "5.6.51-log", 190, "Query", 321),  # a statement inside BEGIN … COMMIT
])
def test_a_position_inside_a_transaction_is_refused_naming_the_next_start(
        events: list[tuple[int, str, str]], version: str, pos: int, kind: str,
        after: int | None) -> None:
    with pytest.raises(ConflictError) as refused:
        check_boundary(Binlog(events, version), BinlogPosition("binlog.000001", pos), "src")
    said = str(refused.value)
    assert f"source src: binlog.000001:{pos} is inside a transaction (its event there is " \
        f"{kind})" in said, said
    assert (f"The next transaction begins at binlog.000001:{after}." in said) == bool(after)
    assert "mariadb-binlog --start-position=4 binlog.000001" in said, said


def test_an_offset_where_no_event_begins_is_refused() -> None:
    with pytest.raises(ConflictError) as refused:
        check_boundary(Binlog(MARIADB, "10.11.19-MariaDB-log"),
                       BinlogPosition("binlog.000001", 1750), "src")
    assert "source src: no event begins at binlog.000001:1750" in str(refused.value)
    assert "SHOW BINLOG EVENTS IN 'binlog.000001'" in str(refused.value)


def test_past_the_files_end_is_refused_and_a_missing_file_left_to_the_caller() -> None:
    with pytest.raises(ConflictError, match=r"past the end of binlog\.000001 \(its size is 2208"):
        check_boundary(Binlog(MARIADB, "10.11.19-MariaDB-log"),
                       BinlogPosition("binlog.000001", SIZE + 1), "src")
    check_boundary(Binlog(MARIADB, "10.11.19-MariaDB-log"),
                   BinlogPosition("binlog.000009", 1851), "src")
