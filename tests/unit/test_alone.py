"""skip_load_exception's second try (one statement a row) on a target modelled in memory: a
row the target refuses is skipped whole, also a row written by several statements (a big
value's INSERT, then its pieces appended), and the rest of the batch commits."""

from __future__ import annotations

import copy
import re
from typing import Any

import pymysql
import pytest

from node.changes import Batch, ChangeType, TargetChange
from node.jobs import JobSpec, PartResult
from node.target.mysql import pieces
from node.target.mysql.loader import Loader
from node.target.mysql.units import render as render_units
from shared.model import DataSource, PipelineParams

PIECE = 16  # BIG_VALUE in these tests: bytes over it go a piece at a time (text: over 4)
_VALUE = re.compile(r"X'([0-9a-f]*)'|'((?:[^'\\]|\\.)*)'|(-?\d+)")
_INSERT = re.compile(r"INSERT INTO `s`\.`t` \((.*?)\) VALUES (.*) ON DUPLICATE KEY UPDATE",
                     re.DOTALL)
_CONCAT = re.compile(r"UPDATE `s`\.`t` SET `(\w+)` = CONCAT\(`\w+`, (.*)\) WHERE "
                     r"\(`id`\) = \((\d+)\)$", re.DOTALL)


def values(text: str) -> list[Any]:
    return [bytes.fromhex(m[1]) if m[1] is not None else m[2] if m[2] is not None
            else int(m[3]) for m in _VALUE.finditer(text)]


class Server:
    """Table s.t (id key, c and b limited in length) as InnoDB under strict mode keeps it:
    a statement the target refuses changes nothing, a transaction is undone unless
    committed, a savepoint is undone to."""

    def __init__(self, rows: dict[int, dict[str, Any]], limits: dict[str, int]) -> None:
        self.committed, self.limits = rows, limits
        self.work = copy.deepcopy(rows)
        self.savepoints: dict[str, dict[int, dict[str, Any]]] = {}
        self.sent: list[str] = []  # every statement, in order
        self.open = True

    # the connection
    def cursor(self) -> Server:
        return self

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def get_server_info(self) -> str:
        return "10.11.6-MariaDB"

    def rollback(self) -> None:
        self.work = copy.deepcopy(self.committed)

    def close(self) -> None:  # a connection dropped: its transaction is gone
        self.rollback()

    def commit(self) -> None:
        self.committed = copy.deepcopy(self.work)

    # the cursor
    def mogrify(self, sql: str, args: Any) -> str:
        return "POSITION " + sql[:30]

    def fetchone(self) -> None:
        return None  # no position row yet

    def nextset(self) -> None:
        return None

    def execute(self, text: str, args: Any = None) -> int:
        count = 0
        for one in text.split(";\n"):  # a multi-statement query stops at its first error
            count = self._one(one)
        return count

    def _one(self, text: str) -> int:
        self.sent.append(text)
        if text.startswith("SAVEPOINT "):
            self.savepoints[text.split()[1]] = copy.deepcopy(self.work)
        elif text.startswith("ROLLBACK TO SAVEPOINT "):
            self.work = copy.deepcopy(self.savepoints[text.split()[3]])
        elif text == "COMMIT":
            self.commit()
        elif (found := _INSERT.match(text)) is not None:
            names = re.findall(r"`(\w+)`", found.group(1))
            after = copy.deepcopy(self.work)
            for at in range(0, len(vals := values(found.group(2))), len(names)):
                row = dict(zip(names, vals[at:at + len(names)], strict=True))
                after.setdefault(row["id"], {}).update(row)
            return self._checked(after)
        elif (found := _CONCAT.match(text)) is not None:
            name, [piece], key = found.group(1), values(found.group(2)), int(found.group(3))
            after = copy.deepcopy(self.work)
            if key not in after:
                return 0
            after[key][name] += piece
            return self._checked(after)
        return 0

    def _checked(self, after: dict[int, dict[str, Any]]) -> int:
        for row in after.values():
            for name, most in self.limits.items():
                if len(row.get(name) or "") > most:  # the statement changes nothing
                    raise pymysql.err.DataError(
                        1406, f"Data too long for column '{name}' at row 1")
        self.work = after
        return 1


def change(id_: int, c: str, b: bytes) -> TargetChange:
    return TargetChange("t1", "s", "t", ChangeType.INSERT, ("id",), None,
                        {"id": id_, "c": c, "b": b}, seq=id_)


def load(server: Server, changes: list[TargetChange]) -> int:
    """The batch through Load with skip_load_exception: its first try a transaction of
    multi-row statements, then, refused, one statement a row (as E/T renders them)."""
    loader = Loader("c.p", {"t1": DataSource("t1", "h")},
                    PipelineParams(skip_load_exception=True))
    # its connection, dropped (undone) after a failed try and taken again
    loader._connection = lambda name: loader._connections.setdefault(  # type: ignore
        name, server)

    def rendered(one_by_one: bool) -> list[PartResult]:
        spec = JobSpec(7, False, one_by_one=one_by_one)
        return [PartResult(render_units(changes, spec), [], len(changes))]

    try:
        return loader.load_units(Batch("c.p", 7), rendered(False), lambda: rendered(True))
    finally:
        loader.close()


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pieces, "BIG_VALUE", PIECE)


def test_a_big_row_whose_insert_is_refused_leaves_the_target_row_as_it_was() -> None:
    """The INSERT of row 1 is refused (c longer than the column): its big value's pieces are not
    appended to the target's old value; row 2 and the position commit."""
    server = Server({1: {"id": 1, "c": "old", "b": b"OLD"}}, {"c": 3, "b": 1000})
    new = b"N" * (2 * PIECE + 3)  # three pieces
    written = load(server, [change(1, "long", new), change(2, "ok", b"two")])
    assert server.committed == {1: {"id": 1, "c": "old", "b": b"OLD"},
                                2: {"id": 2, "c": "ok", "b": b"two"}}
    assert written == 1
    second = server.sent[server.sent.index("SAVEPOINT setl_row"):]
    assert [text.split(" (")[0] for text in second] == [
        "SAVEPOINT setl_row",
        "INSERT INTO `s`.`t`",  # row 1 with b empty: refused
        "ROLLBACK TO SAVEPOINT setl_row",
        "INSERT INTO `s`.`t`",  # row 2: one statement, no savepoint
        "POSITION INSERT INTO retl.retl_position", "COMMIT"]


def test_a_big_row_whose_second_piece_is_refused_leaves_the_target_row_as_it_was() -> None:
    """Row 1's INSERT and first piece go in, its second piece is refused (b longer than
    the target's column): the row is undone to before its INSERT, not left with c new and
    b a piece long."""
    server = Server({1: {"id": 1, "c": "old", "b": b"OLD"}}, {"c": 3, "b": PIECE + 4})
    written = load(server, [change(1, "new", b"N" * (2 * PIECE + 3)),
                            change(2, "ok", b"two")])
    assert server.committed == {1: {"id": 1, "c": "old", "b": b"OLD"},
                                2: {"id": 2, "c": "ok", "b": b"two"}}
    assert written == 1
    second = server.sent[server.sent.index("SAVEPOINT setl_row"):]
    assert [text.split(" ")[0] for text in second] == [
        "SAVEPOINT", "INSERT", "UPDATE", "UPDATE", "ROLLBACK", "INSERT", "POSITION", "COMMIT"]


def test_a_big_row_the_target_takes_is_written_whole_in_one_by_one_mode() -> None:
    """Row 2 is refused (a key alone cannot make a batch fail): row 1, big, goes in whole
    with its three pieces, and no savepoint is undone to."""
    server = Server({}, {"c": 3, "b": 1000})
    new = b"N" * PIECE + b"E" * PIECE + b"W"
    written = load(server, [change(1, "new", new), change(2, "long", b"two")])
    assert server.committed == {1: {"id": 1, "c": "new", "b": new}}
    assert not any(text.startswith("ROLLBACK") for text in server.sent)
    assert written == 4  # its INSERT and three pieces, as the first try counts them


class Unique(Server):
    """Table s.t whose column c is unique on the target (not on the source): a second
    row with the same c is refused as a duplicate entry."""

    def _checked(self, after: dict[int, dict[str, Any]]) -> int:
        seen: set[Any] = set()
        for row in after.values():
            if row.get("c") in seen:
                raise pymysql.IntegrityError(
                    1062, f"Duplicate entry '{row['c']}' for key 'c'")
            seen.add(row.get("c"))
        self.work = after
        return 1


def test_rows_skipped_are_counted_for_status_once_their_transaction_commits(
        caplog: pytest.LogCaptureFixture) -> None:
    """skip_load_exception skipped a row with only a log line: status, metrics and alarms
    never showed it. The loader counts it (once the transaction commits), and the log line
    names channel, pipeline and processId."""
    server = Unique({1: {"id": 1, "c": "a", "b": b""}}, {})
    loader = Loader("c.p", {"t1": DataSource("t1", "h")}, PipelineParams(skip_load_exception=True))
    loader._connection = lambda name: loader._connections.setdefault(  # type: ignore
        name, server)
    changes = [change(2, "a", b"x"), change(3, "c", b"y"), change(4, "a", b"z")]

    def rendered(one_by_one: bool) -> list[PartResult]:
        return [PartResult(render_units(changes, JobSpec(7, False, one_by_one=one_by_one)),
                           [], len(changes))]

    with caplog.at_level("WARNING"):
        written = loader.load_units(Batch("c.p", 7), rendered(False), lambda: rendered(True))
    assert written == 1 and set(server.committed) == {1, 3}
    assert loader.take_skipped() == 2
    assert loader.take_skipped() == 0  # taken: the runner adds them up
    skips = [r.getMessage() for r in caplog.records if "event=row_skipped" in r.getMessage()]
    assert len(skips) == 2
    assert all("channel=c pipeline=c.p process_id=7" in line for line in skips)
