"""A copy follows a table's name (its chunks are read ``FROM schema.table``): a DDL batch
that renames, drops or replaces the table being copied fails the copy, with the statement,
its position and what to copy instead, and no chunk of it is read by that name after the
batch (:meth:`node.snapshot.controller.Snapshots.ddl`). A gh-ost cut-over
``RENAME TABLE t TO t_old, t_new TO t`` made the chunks left read the new ``t`` and end
"done" while the old table's rows never reached the target's ``t_old``; a plain rename or a
drop made later windows fail again and again with a misleading error."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock

import pymysql
import pytest

from node import ddlsession
from node.changes import Batch, ChangeType, RowChange
from node.extract.chunks import SplitKey, chunks_of
from node.snapshot import controller
from node.snapshot import plan as plan_module
from node.snapshot.controller import Snapshots
from node.snapshot.moved import Moved, moved
from node.snapshot.state import TableCopy, failed_problem
from node.snapshot.watermarks import Window
from node.snapshot.windowreads import Work
from shared import positions
from shared.errors import CoordinationError
from shared.model import BinlogPosition, PipelineParams

PID = "shop.forward"
AT = ((ddlsession.POSITION, ("mariadb-bin.000003", 4711, "1@src:3306")),)


class Store:
    def __init__(self) -> None:
        self.saved: list[dict[str, Any]] | None = None
        self.failing = False

    def save(self, copies: list[TableCopy]) -> None:
        if self.failing:
            raise OSError("ZooKeeper away")
        self.saved = [copy.to_json() for copy in copies]

    def requests(self) -> list[tuple[str, dict[str, Any]]]:
        return []

    def control(self) -> dict[str, Any]:
        return {}

    def write_plan(self, copy: TableCopy) -> None:
        pass

    def forget(self, copy: TableCopy) -> None:
        pass


class Compiled:
    version = 1

    def stored(self, schema: str, table: str) -> tuple[str, str]:
        return schema.lower(), table.lower()  # (a source that folds names)

    def stored_schema(self, schema: str) -> str:
        return schema.lower()


class Door:
    waiting = False

    def take(self, most: int) -> list[Any]:
        return []

    def keyed(self, asked: list[Any]) -> None:
        pass

    def again(self, asked: list[Any]) -> None:
        pass


class Reads:
    """The window's reads: which chunks of which tables were read."""

    def __init__(self) -> None:
        self.columns: dict[Any, Any] = {}
        self.read_of: list[str] = []

    def task(self, window_id: int, work: Work) -> Work:
        return work

    def read(self, tasks: list[Work], work: list[Work]) -> list[Any]:
        self.read_of += [f"{one.copy.table}#{one.chunk.index}" for one in work
                         if one.copy is not None and one.chunk is not None]
        return [SimpleNamespace(count=10, lines=None) for _ in work]


def copy_of(table: str, done: set[int]) -> TableCopy:
    return TableCopy(f"shop.{table}@1", "shop", table, "",
                     SplitKey("shop", table, ("id",), "int"), list(chunks_of([10, 20])), 30,
                     done=set(done))


def snapshots(monkeypatch: pytest.MonkeyPatch) -> tuple[Snapshots, Store, Reads]:
    """A copy of shop.t (3 chunks, chunk 0 done) and one of shop.u (none done): chunk 1 of
    t in a window open (read; its batch comes after the DDL's), the others queued."""
    store = Store()
    found = Snapshots(PID, None, Compiled(), PipelineParams(), None, store, Door())  # type: ignore[arg-type]
    reads = Reads()
    found._reads = reads  # type: ignore[assignment]
    monkeypatch.setattr(found, "_signal", lambda kind, window_id: None)
    t, u = copy_of("t", {0}), copy_of("u", set())
    found.copies = [t, u]
    found._pending[7] = Window(7, [Work(t, t.chunks[1]), Work(u, u.chunks[0])],
                               [SimpleNamespace(count=5, lines=None),
                                SimpleNamespace(count=6, lines=None)])
    found._queue.extend([Work(t, t.chunks[2]), Work(u, u.chunks[1]), Work(u, u.chunks[2])])
    found.started = True
    return found, store, reads


def ddl(statement: str) -> RowChange:
    return RowChange("shop", "", ChangeType.DDL, ddl=statement,
                     session=(("sql_mode", 0), *AT))


def later_batch(window_id: int) -> Batch:
    batch = Batch(PID, 9)
    batch.windows = [(window_id, 0, 0)]
    return batch


def planned(found: Snapshots) -> list[str]:
    """The chunks the next windows read (every one the queue holds)."""
    while found._queue:
        found._pending.clear()
        assert found._window(True) or not found._queue
    return found._reads.read_of  # type: ignore[attr-defined, no-any-return]


def test_a_cut_over_rename_fails_the_copy_and_no_chunk_of_it_is_read_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    found, store, _ = snapshots(monkeypatch)
    found.ddl([ddl("RENAME TABLE t TO t_old, t_new TO t")])
    t, u = found.copies
    assert (t.state, u.state) == ("failed", "copying")
    assert t.error == (
        "pipeline shop.forward: shop.t was renamed to shop.t_old by a DDL in the source's "
        "binlog at mariadb-bin.000003:4711 ('RENAME TABLE t TO t_old, t_new TO t') while it "
        "was being copied (1 of 3 chunks copied); the copy reads its chunks by the table's "
        "name, which no longer holds that table (the chunks left would copy another table's "
        "rows, or none), so it stops here; the rows of the table not copied yet are missing "
        "under its new name shop.t_old: copy it again under that name: setl snapshot shop "
        "--table shop.t_old")
    assert store.saved is not None and [c["state"] for c in store.saved] == \
        ["failed", "copying"]  # saved before the DDL batch goes on
    # the window open (its low watermark after the DDL): t's read is dropped, u's goes in
    batch = later_batch(7)
    assert [read.count for read in found.reads_for(batch)] == [6]
    found.loaded(batch)
    assert (t.done, t.state, u.done) == ({0}, "failed", {0})
    # no later window reads t by its name; u goes on to its end
    assert planned(found) == ["u#1", "u#2"]
    problem = found.problem()
    assert problem.startswith("pipeline shop.forward: the copy of shop.t failed: shop.t was "
                              "renamed to shop.t_old")
    assert problem.endswith("copy it again under that name: setl snapshot shop --table "
                            "shop.t_old; see setl snapshot status shop")
    # copying t_old again is what the error asked: it is no longer the last error
    again = copy_of("t_old", set())
    again.started = t.started + 1
    assert failed_problem(PID, [t, again], t.finished) == ""


@pytest.mark.parametrize(("statement", "how"), [
    ("DROP TABLE IF EXISTS shop.x, T", "dropped"),
    ("RENAME TABLE t TO t2", "renamed to shop.t2"),
    ("ALTER TABLE `t` ADD COLUMN c INT, RENAME TO archive.t", "renamed to archive.t"),
    ("CREATE OR REPLACE TABLE t (id INT PRIMARY KEY)", "replaced"),
    ("DROP DATABASE shop", "dropped with its database"),
])
def test_a_drop_rename_or_replace_of_the_table_fails_its_copy(
        monkeypatch: pytest.MonkeyPatch, statement: str, how: str) -> None:
    found, _, _ = snapshots(monkeypatch)
    found.ddl([ddl(statement)])
    t = found.copies[0]
    assert t.state == "failed" and t.error.startswith(f"pipeline shop.forward: shop.t was {how} ")
    assert "mariadb-bin.000003:4711" in t.error and "setl snapshot shop --table" in t.error
    assert [read.count for read in found.reads_for(later_batch(7))] == \
        ([] if how.startswith("dropped with") else [6])
    assert planned(found) == ([] if how.startswith("dropped with") else ["u#1", "u#2"])


@pytest.mark.parametrize("statement", [
    "ALTER TABLE t ADD COLUMN c INT",  # a window reads the columns after its low watermark
    "TRUNCATE TABLE t",  # the same table: replayed, the target's rows go too
    "RENAME TABLE other TO other2",
    "DROP TABLE tt",
    "CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)",
    "DROP DATABASE elsewhere",
])
def test_other_ddl_leaves_the_copy_going(monkeypatch: pytest.MonkeyPatch,
                                         statement: str) -> None:
    found, store, _ = snapshots(monkeypatch)
    found.ddl([ddl(statement)])
    assert [copy.state for copy in found.copies] == ["copying", "copying"]
    assert store.saved is None
    assert [read.count for read in found.reads_for(later_batch(7))] == [5, 6]
    assert planned(found) == ["t#2", "u#1", "u#2"]


def test_a_failure_not_saved_stops_the_ddl_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loaded with the copy still saved as copying, a restart would read the name again."""
    found, store, _ = snapshots(monkeypatch)
    store.failing = True
    with pytest.raises(CoordinationError, match=r"the failed copy of shop.t cannot be saved"):
        found.ddl([ddl("DROP TABLE t")])


def test_a_window_whose_read_fails_does_not_queue_a_failed_copys_chunks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A window abandoned (the DDL inside it), or whose read failed (the table gone): its
    chunks of a failed copy are not queued again."""
    found, _, _ = snapshots(monkeypatch)
    found.ddl([ddl("DROP TABLE t")])
    found.abandoned(7)
    assert [f"{w.copy.table}#{w.chunk.index}" for w in found._queue] == \
        ["u#0", "t#2", "u#1", "u#2"]  # (t#2 queued before: passed over when taken)
    assert planned(found) == ["u#0", "u#1", "u#2"]


def test_the_tables_a_statement_takes_from_their_names() -> None:
    swap = moved("RENAME TABLE a TO tmp, b TO a, tmp TO b", "s")
    assert sorted((one.table, one.to) for one in swap) == \
        [("a", ("s", "b")), ("b", ("s", "a"))]
    assert moved("ALTER TABLE t RENAME COLUMN a TO b", "s") == []
    assert moved("TRUNCATE t", "s") == []
    assert [(one.schema, one.table, one.how) for one in moved("DROP SCHEMA IF EXISTS s", "")] \
        == [("s", "", "dropped with its database")]


# -- a copy planned after the DDL ran (Select behind the source) --------------------------------

SERVER = "1@src:3306"


@pytest.mark.parametrize(("planned_at", "fails"), [
    (None, True),  # not known (a copy saved by an older setl): failed, as ever
    (BinlogPosition("mariadb-bin.000003", 4000, "", SERVER), True),  # planned before it
    (BinlogPosition("mariadb-bin.000002", 99999, "", SERVER), True),  # an earlier file
    (BinlogPosition("mariadb-bin.000003", 4711, "", SERVER), False),  # right after it
    (BinlogPosition("mariadb-bin.000003", 9000, "", SERVER), False),
    (BinlogPosition("mariadb-bin.000010", 4, "", SERVER), False),  # files by their number
    (BinlogPosition("mariadb-bin.000003", 9000, "", "2@replica:3306"), True),  # switchover
    (BinlogPosition("mariadb-bin.000003", 9000, "", ""), True),  # its server not known
])
def test_a_copy_planned_after_the_ddl_ran_is_not_failed_by_it(
        monkeypatch: pytest.MonkeyPatch, planned_at: BinlogPosition | None,
        fails: bool) -> None:
    """Select behind (right after a gh-ost cut-over): ``setl snapshot --table t`` split
    today's t, whose name the older cut-over gave it; that copy reads the right table, and
    failing it would say to copy t_old (which, copied, hid t's failure: t left incomplete)."""
    found, store, _ = snapshots(monkeypatch)
    t, u = found.copies
    t.planned_at = planned_at
    found.ddl([ddl("RENAME TABLE t TO t_old, t_new TO t")])
    assert t.state == ("failed" if fails else "copying") and u.state == "copying"
    assert (t.again == "shop.t_old") == fails
    assert (store.saved is not None) == fails
    assert planned(found) == (["u#1", "u#2"] if fails else ["t#2", "u#1", "u#2"])


def test_a_ddl_without_its_position_fails_a_copy_planned_at_a_known_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    found, _, _ = snapshots(monkeypatch)
    t = found.copies[0]
    t.planned_at = BinlogPosition("mariadb-bin.000009", 4, "", SERVER)
    found.ddl([RowChange("shop", "", ChangeType.DDL, ddl="DROP TABLE t",
                         session=(("sql_mode", 0),))])
    assert t.state == "failed"


def test_where_a_copy_was_planned_is_saved_with_it() -> None:
    t = copy_of("t", {0})
    assert "planned_at" not in t.to_json()
    assert TableCopy.from_json(t.to_json()).planned_at is None  # (saved by an older setl)
    t.planned_at = BinlogPosition("mariadb-bin.000003", 4711, "", SERVER)
    data = json.loads(json.dumps(t.to_json()))
    assert data["planned_at"] == ["mariadb-bin.000003", 4711, SERVER]
    assert TableCopy.from_json(data).planned_at == t.planned_at


def test_a_copy_is_planned_at_the_binlog_end_read_before_its_split(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Read after the split, a DDL logged between the two would pass for one before it."""
    done: list[str] = []
    end = BinlogPosition("mariadb-bin.000003", 4711, "0-1-9", SERVER)

    @contextlib.contextmanager
    def connect(source: Any, **kwargs: Any) -> Iterator[Any]:
        conn = MagicMock()
        conn.cursor.return_value.__enter__.return_value = "cursor"
        yield conn

    key = SplitKey("shop", "t", ("id",), "int")
    monkeypatch.setattr(plan_module, "connect", connect)
    monkeypatch.setattr(positions, "binlog_end",
                        lambda cursor, name: done.append("end") or end)
    monkeypatch.setattr(plan_module.chunks, "table_key",
                        lambda cursor, schema, table, *more: done.append("key") or key)
    monkeypatch.setattr(plan_module.chunks, "split", lambda cursor, k, size, where: done.append(
        "split") or SimpleNamespace(key=k, chunks=chunks_of([10]), rows=20))
    compiled = SimpleNamespace(wants=lambda schema, table: True,
                               configured_keys=lambda schema, table: None)
    source = SimpleNamespace(name="src")
    copy = plan_module.plan(PID, source, compiled, 10, "shop", "t", "")  # type: ignore[arg-type]
    assert done == ["end", "key", "split"] and copy.planned_at == end
    # not known (no privilege to read it, a server without a binlog): None, failed as ever
    monkeypatch.setattr(positions, "binlog_end", lambda cursor, name: BinlogPosition())
    assert plan_module.plan(PID, source, compiled, 10, "shop", "t", "").planned_at is None  # type: ignore[arg-type]

    def refused(cursor: Any, name: str) -> BinlogPosition:
        raise pymysql.err.OperationalError(1227, "Access denied")
    monkeypatch.setattr(positions, "binlog_end", refused)
    assert plan_module.plan(PID, source, compiled, 10, "shop", "t", "").planned_at is None  # type: ignore[arg-type]


# -- a copy started while another thread saves ---------------------------------------------------

def test_a_copy_started_while_another_thread_saves_is_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A save of Load's (or Select's) thread prunes the copies, then puts the pruned list
    in their place: a copy the snapshot thread started in between was dropped (from memory
    and ZooKeeper, its request deleted)."""
    found, store, _ = snapshots(monkeypatch)
    new = copy_of("v", set())
    taken: list[str] = []
    monkeypatch.setattr(store, "requests", lambda: [("req-1", {"schema": "shop", "table": "v",
                                                               "asked": 5})], raising=False)
    monkeypatch.setattr(store, "taken", taken.append, raising=False)
    monkeypatch.setattr(found, "_plan", lambda schema, table, where: new)
    pruning, go = threading.Event(), threading.Event()
    real = controller.pruned

    def slow_pruned(copies: list[TableCopy], now: float) -> list[TableCopy]:
        kept = real(copies, now)
        if threading.current_thread().name == "load":
            pruning.set()
            go.wait(5)  # (the snapshot thread starts the copy meanwhile)
        return kept

    monkeypatch.setattr(controller, "pruned", slow_pruned)
    load = threading.Thread(target=found._save, name="load")
    load.start()
    assert pruning.wait(5)
    requests = threading.Thread(target=found._take_requests, name="snapshot")
    requests.start()
    requests.join(0.5)  # done (no lock) or waiting for the save of Load's thread
    go.set()
    load.join(5)
    requests.join(5)
    assert not load.is_alive() and not requests.is_alive()
    assert [copy.table for copy in found.copies] == ["t", "u", "v"]
    assert store.saved is not None and [c["table"] for c in store.saved] == ["t", "u", "v"]
    assert taken == ["req-1"]


# -- statements that take a database, or give a name back ----------------------------------------

@pytest.mark.parametrize("statement", [
    "CREATE OR REPLACE DATABASE shop",
    "create or replace schema `SHOP` CHARACTER SET utf8mb4",
])
def test_a_database_made_again_fails_the_copies_in_it(monkeypatch: pytest.MonkeyPatch,
                                                     statement: str) -> None:
    """MariaDB's CREATE OR REPLACE DATABASE drops its tables, as DROP DATABASE does (their
    windows failed forever: the table does not exist)."""
    found, _, _ = snapshots(monkeypatch)
    found.ddl([ddl(statement)])
    assert [copy.state for copy in found.copies] == ["failed", "failed"]
    assert found.copies[0].error.startswith(
        "pipeline shop.forward: shop.t was dropped with its database by a DDL")
    assert planned(found) == []


@pytest.mark.parametrize("statement", [
    "RENAME TABLE t TO tmp, tmp TO t",
    "ALTER TABLE t RENAME TO t",
    "ALTER TABLE shop.t RENAME TO shop.t",
    "RENAME TABLE t TO tmp, u TO t2, tmp TO t, t2 TO u",
])
def test_a_rename_that_gives_the_name_back_leaves_the_copy_going(
        monkeypatch: pytest.MonkeyPatch, statement: str) -> None:
    found, store, _ = snapshots(monkeypatch)
    found.ddl([ddl(statement)])
    assert [copy.state for copy in found.copies] == ["copying", "copying"]
    assert store.saved is None
    assert planned(found) == ["t#2", "u#1", "u#2"]


def test_what_a_database_made_again_or_a_name_given_back_takes() -> None:
    assert moved("CREATE OR REPLACE DATABASE s", "") == [
        Moved("s", "", "dropped with its database")]
    assert moved("CREATE DATABASE IF NOT EXISTS s", "") == []
    assert moved("CREATE OR REPLACE TABLE t (id INT)", "s") == [Moved("s", "t", "replaced")]
    assert moved("RENAME TABLE a TO tmp, tmp TO a", "s") == []
    assert moved("ALTER TABLE t RENAME TO t", "s") == []
    assert moved("RENAME TABLE a TO tmp, tmp TO a, b TO c", "s") == [
        Moved("s", "b", "renamed", ("s", "c"))]
