"""Server settings setl must not inherit: a server's default ``sql_select_limit`` (every
connection reads every row), a target without ``LOAD DATA LOCAL`` (``local_infile`` OFF:
upserts and copies go as statements), and a target connection the server closed while the
pipeline was quiet (``wait_timeout``: Load tries once more on a new connection, and a batch
whose COMMIT went through before the connection was lost is not written twice)."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from node.changes import Batch, ChangeType, TargetChange
from node.jobs import JobSpec, PartResult
from node.target.mysql.facts import TableFacts, TargetFacts, read_facts
from node.target.mysql.loader import Loader
from node.target.mysql.render import Column
from node.target.mysql.units import render
from shared.endpoint import ALL_ROWS, Connection, all_rows
from shared.errors import LoadError
from shared.model import BinlogPosition, DataSource, PipelineParams

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
                  "SET TRANSACTION READ ONLY", "SET STATEMENT max_statement_time = 1 FOR "
                  "SELECT 1", "SET ROLE r", "SELECT 1"):
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
            self.found = [("PRIMARY", "id", 0)]
        elif "KEY_COLUMN_USAGE" in sql:
            self.found = [(0,)]
        elif "information_schema.TRIGGERS" in sql or "CHECK_CONSTRAINTS" in sql:
            self.found = []
        elif "information_schema.TABLES" in sql:
            self.found = [("InnoDB", "YES")]
        elif sql.startswith("SELECT @@GLOBAL.local_infile, LEAST("):
            self.found = [(self.local_infile, 4 << 20)]
        else:
            raise AssertionError(sql)

    def fetchall(self) -> list[Any]:
        return self.found

    def fetchone(self) -> Any:
        return self.found[0] if self.found else None


def test_a_tables_facts_say_whether_its_server_takes_load_data_local() -> None:
    assert read_facts(Answers(1), "s", "t").local_infile is True
    assert read_facts(Answers(0), "s", "t").local_infile is False
    assert read_facts(Answers(1), "s", "t").packet == 4 << 20  # max_allowed_packet


class Model:
    """A target in memory: its committed statements and the pipeline's position row. A
    connection may be lost (client error 2013) when a query is sent: ``before`` it runs (the
    server had closed the connection), or ``after`` its COMMIT ran (the answer lost)."""

    def __init__(self, losses: list[str]) -> None:
        self.losses = losses  # for each connection made, in turn: "", "before", "after"
        self.committed: list[str] = []
        self.position: tuple[Any, ...] | None = None
        self.connections = 0

    def connect(self) -> Conn:
        self.connections += 1
        return Conn(self, self.losses.pop(0) if self.losses else "")


class Conn:
    def __init__(self, model: Model, loss: str) -> None:
        self.model, self.loss = model, loss
        self.work: list[str] = []
        self.found: tuple[Any, ...] | None = None
        self.open = True

    def cursor(self) -> Conn:
        return self

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def get_server_info(self) -> str:
        return "10.11.6-MariaDB"

    def rollback(self) -> None:
        self.work = []

    def close(self) -> None:
        self.rollback()
        self.open = False

    def mogrify(self, sql: str, args: Any) -> str:
        assert sql.startswith("INSERT INTO retl.retl_position")
        return f"POSITION {args[2]} {args[3]} {args[5]} {args[1]}"

    def nextset(self) -> None:
        return None

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.found

    def execute(self, text: str, args: Any = None) -> int:
        if not self.open:
            raise pymysql.err.InterfaceError(0, "")
        if self.loss == "before":
            self.open = False
            raise pymysql.err.OperationalError(2013, "Lost connection to server during query")
        if text.startswith("SELECT binlog_file"):  # the position row, locked
            self.found = self.model.position
            return 1
        for one in text.split(";\n"):
            if one.startswith("POSITION "):
                _, file, pos, epoch, process_id = one.split()
                self.work.append(f"position {file} {pos} {epoch} {process_id}")
            elif one == "COMMIT":
                self.commit()
                if self.loss == "after":
                    self.open = False
                    raise pymysql.err.OperationalError(2013, "Lost connection to server "
                                                             "during query")
            else:
                self.work.append(one)
        return 1

    def commit(self) -> None:
        for statement in self.work:
            if statement.startswith("position "):
                _, file, pos, epoch, process_id = statement.split()
                self.model.position = (file, int(pos), int(epoch), int(process_id), "", "",
                                       "")
            else:
                self.model.committed.append(statement)
        self.work = []


def load(model: Model) -> tuple[int, Loader]:
    loader = Loader("c.p", {"t1": DataSource("t1", "h")}, PipelineParams())
    loader._connection = lambda name: loader._connections.setdefault(  # type: ignore
        name, model.connect())
    batch = Batch("c.p", 7, start=BinlogPosition("b.000001", 100),
                  _end=BinlogPosition("b.000001", 200))
    facts = TableFacts(COLUMNS, (frozenset({"id"}),))
    units = render(upserts(2), JobSpec(7, False, {TARGET: facts}))
    try:
        return loader.load_units(batch, [PartResult(units, [], 2)]), loader
    finally:
        loader.close()


@pytest.mark.parametrize("loss", ["before", "after"])
def test_a_connection_lost_is_tried_once_more_and_the_batch_written_once(loss: str) -> None:
    """``before``: the server had closed the idle connection (wait_timeout) and the batch
    goes on a new one. ``after``: the COMMIT went through and its answer was lost; the new
    connection finds the position row at the batch's end and writes nothing again."""
    model = Model([loss])
    written, loader = load(model)
    assert model.connections == 2
    assert [s for s in model.committed if s.startswith("INSERT INTO `s`.`t`")] == \
        [next(s for s in model.committed if s.startswith("INSERT"))]  # once
    assert model.position is not None and model.position[:2] == ("b.000001", 200)
    assert written == (2 if loss == "before" else 0)
    assert loader.written["t1"] == BinlogPosition("b.000001", 200)


def test_a_connection_lost_again_stops_the_load() -> None:
    model = Model(["before", "before"])
    with pytest.raises(LoadError, match="Lost connection"):
        load(model)
    assert model.connections == 2 and model.committed == [] and model.position is None


class Flaky:
    """A target connection for the facts that the server closed: the first read fails."""

    def __init__(self, answers: Answers, lost: bool) -> None:
        self.answers, self.lost = answers, lost

    def cursor(self) -> Any:
        if self.lost:
            raise pymysql.err.OperationalError(2006, "MySQL server has gone away")
        return _Within(self.answers)

    def commit(self) -> None:
        pass


class _Within:
    def __init__(self, answers: Answers) -> None:
        self.answers = answers

    def __enter__(self) -> Answers:
        return self.answers

    def __exit__(self, *_: object) -> None:
        pass


def test_facts_read_on_a_connection_the_server_closed_are_read_on_a_new_one() -> None:
    made: list[Flaky] = [Flaky(Answers(1), lost=True), Flaky(Answers(0), lost=False)]
    given: dict[str, Flaky] = {}
    discarded: list[str] = []

    def connection(name: str) -> Any:
        if name not in given:
            given[name] = made.pop(0)
        return given[name]

    def discard(name: str) -> None:
        discarded.append(name)
        given.pop(name, None)

    facts = TargetFacts({"t1": DataSource("t1", "h")}, connection, discard)
    assert facts.of(TARGET).local_infile is False  # read on the second connection
    assert discarded == ["t1"] and not made
