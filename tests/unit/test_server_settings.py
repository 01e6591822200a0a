"""Server settings setl must not inherit: a server's default ``sql_select_limit`` (every
connection reads every row), and a target without ``LOAD DATA LOCAL`` (``local_infile`` OFF:
upserts and copies go as statements)."""

from __future__ import annotations

from typing import Any

import pytest

from node.changes import ChangeType, TargetChange
from node.jobs import JobSpec
from node.target.mysql.facts import TableFacts, read_facts
from node.target.mysql.render import Column
from node.target.mysql.units import render
from shared.endpoint import ALL_ROWS, Connection, all_rows

TARGET = ("t1", "s", "t")
COLUMNS = {"id": Column("int", None), "v": Column("varchar", "utf8mb4")}


def test_every_connection_reads_every_row_whatever_the_servers_sql_select_limit() -> None:
    """A global sql_select_limit of 50 cut every snapshot chunk and verify's reads to 50
    rows: each connection sets the session's limit to the most, in the SET of its own
    init_command, or apart where that is another statement."""
    assert all_rows(None) == ("SET " + ALL_ROWS, False)
    assert all_rows("SET time_zone = '+00:00'") == (
        f"SET {ALL_ROWS}, time_zone = '+00:00'", False)
    assert all_rows("set @x = @@global.binlog_checksum") == (
        f"SET {ALL_ROWS}, @x = @@global.binlog_checksum", False)
    for apart in ("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                  "SET TRANSACTION READ ONLY", "SELECT 1"):
        assert all_rows(apart) == (apart, True)
    conn = Connection(host="127.0.0.1", defer_connect=True, init_command="SET time_zone = 'x'")
    assert conn.init_command == f"SET {ALL_ROWS}, time_zone = 'x'"
    assert Connection(host="127.0.0.1", defer_connect=True).init_command == "SET " + ALL_ROWS


def upserts(count: int) -> list[TargetChange]:
    return [TargetChange(*TARGET, ChangeType.INSERT, ("id",), None, {"id": n, "v": "a"}, 0, n)
            for n in range(count)]


@pytest.mark.parametrize("local_infile", [True, False])
def test_merged_upserts_go_as_statements_where_the_target_takes_no_load_data(
        local_infile: bool) -> None:
    """A target with local_infile OFF (MySQL 8's default) refused every LOAD DATA: six
    failures later the channel paused. Its upserts go as INSERT … ON DUPLICATE KEY UPDATE."""
    facts = TableFacts(COLUMNS, (frozenset({"id"}),), local_infile=local_infile)
    spec = JobSpec(7, False, {TARGET: facts}, load_batch_size=100, load_data_min_rows=2)
    [unit] = render(upserts(3), spec, big=False)
    loads = [sql.text.startswith("LOAD DATA") for sql in unit.sqls]
    assert loads == ([True] if local_infile else [False])
    if not local_infile:
        [sql] = unit.sqls
        assert sql.text.startswith("INSERT INTO `s`.`t`") and sql.data is None


class Answers:
    """A cursor answering read_facts' queries: a table of two columns keyed by id."""

    def __init__(self, local_infile: int) -> None:
        self.local_infile = local_infile
        self.found: list[Any] = []

    def execute(self, sql: str, args: Any = None) -> None:
        if "information_schema.COLUMNS" in sql:
            self.found = [("id", "int", None, 0, "int(11)", 0, None, 0, 0),
                          ("v", "varchar", "utf8mb4", 0, "varchar(9)", 0, "x", 1, 0)]
        elif "information_schema.STATISTICS" in sql:
            self.found = [("PRIMARY", "id")]
        elif "KEY_COLUMN_USAGE" in sql:
            self.found = [(0,)]
        elif "information_schema.TRIGGERS" in sql:
            self.found = []
        elif "information_schema.TABLES" in sql:
            self.found = [("InnoDB", "YES")]
        elif sql == "SELECT @@GLOBAL.local_infile":
            self.found = [(self.local_infile,)]
        else:
            raise AssertionError(sql)

    def fetchall(self) -> list[Any]:
        return self.found

    def fetchone(self) -> Any:
        return self.found[0] if self.found else None


def test_a_tables_facts_say_whether_its_server_takes_load_data_local() -> None:
    assert read_facts(Answers(1), "s", "t").local_infile is True
    assert read_facts(Answers(0), "s", "t").local_infile is False
