"""A copy follows a table's name (its chunks are read ``FROM schema.table``): a DDL batch
that renames, drops or replaces the table being copied fails the copy, with the statement,
its position and what to copy instead, and no chunk of it is read by that name after the
batch (:meth:`node.snapshot.controller.Snapshots.ddl`). A gh-ost cut-over
``RENAME TABLE t TO t_old, t_new TO t`` made the chunks left read the new ``t`` and end
"done" while the old table's rows never reached the target's ``t_old``; a plain rename or a
drop made later windows fail again and again with a misleading error."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from node import ddlsession
from node.changes import Batch, ChangeType, RowChange
from node.extract.chunks import SplitKey, chunks_of
from node.snapshot.controller import Snapshots, _Window
from node.snapshot.moved import moved
from node.snapshot.state import TableCopy, failed_problem
from node.snapshot.windowreads import Work
from shared.errors import CoordinationError
from shared.model import PipelineParams

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
    found._pending[7] = _Window(7, [Work(t, t.chunks[1]), Work(u, u.chunks[0])],
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
