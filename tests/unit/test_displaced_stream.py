"""The stream's upserts into a table whose copy is unfinished go with the displaced step
(node/target/mysql/displaced.py): which tables (node/snapshot/controller.py ``copying``,
node/snapshot/door.py ``tables``), which changes, the look-up of each statement chunk right
before it; elsewhere the stream's SQL is unchanged. A 1062 pause says what to do
(node/target/mysql/duplicate.py)."""

from __future__ import annotations

import dataclasses
import threading
from types import SimpleNamespace
from typing import Any

import pymysql
import pytest

from node.changes import ChangeType, TargetChange
from node.jobs import READ_BIT, ROW_BITS, JobSpec, Unit
from node.merge import PartialRow
from node.snapshot import door as door_module
from node.snapshot.door import DoorQueue
from node.snapshot.watermarks import Window
from node.snapshot.windowreads import Work
from node.target.mysql import displaced, duplicate, lookedup
from node.target.mysql import loader as loader_module
from node.target.mysql.units import render
from tests.unit.test_displaced import SLOT, FakeCursor, row
from tests.unit.test_merge import ins, upd
from tests.unit.test_snapshot_ddl import copy_of, snapshots

T = ("dst", "s", "t")


def kinds(changes: list[Any], copying: frozenset[Any] = frozenset({T}), size: int = 100,
          reads: bool = False) -> list[str]:
    spec = JobSpec(1, False, SLOT, load_batch_size=size, reads=reads,  # type: ignore[arg-type]
                   copying=copying)
    return [sql.text for unit in render(changes, spec) for sql in unit.sqls]


def looked(texts: list[str]) -> list[str]:
    return [text for text in texts if text.startswith(displaced.MARK)]


def test_the_streams_upserts_into_a_table_being_copied_are_looked_up() -> None:
    changes = [ins(1 << ROW_BITS, row(1, 5)), upd(2 << ROW_BITS, (2,), row(2, 6))]
    found = kinds(changes)
    assert [text.split()[0] for text in found] == ["SELECT", "INSERT"]
    assert "(`slot`) IN ((5), (6)) AND (`slot`, `id`) NOT IN ((5, 1), (6, 2))" in found[0]


def test_elsewhere_the_streams_sql_is_unchanged() -> None:
    changes = [ins(1 << ROW_BITS, row(1, 5)), upd(2 << ROW_BITS, (2,), row(2, 6))]
    plain = kinds(changes, frozenset())
    assert not looked(plain)
    assert not looked(kinds(changes, frozenset({("dst", "s", "other")})))
    assert [text for text in kinds(changes) if not displaced.marked(
        SimpleNamespace(text=text))] == plain  # type: ignore[arg-type]


def test_a_key_change_a_delete_and_a_part_of_a_row_are_not_looked_up() -> None:
    move = upd(1 << ROW_BITS, (1,), row(3, 5))  # (key 1 → 3: an UPDATE of the key)
    gone = TargetChange("dst", "s", "t", ChangeType.DELETE, ("id",), (4,), None, 0,
                        2 << ROW_BITS)
    part = upd(3 << ROW_BITS, (5,), PartialRow({"id": 5, "note": "x"}, row(5, 9)))
    for change in (move, gone, part):
        assert not lookedup.streamed(change, frozenset({T})), change
    assert not looked(kinds([move, gone]))
    assert lookedup.streamed(upd(4 << ROW_BITS, (6,), row(6, 6)), frozenset({T}))
    assert not lookedup.streamed(upd(4 << ROW_BITS, (6,), row(6, 6)), frozenset())


def test_each_chunks_look_up_goes_right_before_it() -> None:
    """Row 2 gives slot 5 to row 1 (source order): the look-up of row 1's chunk runs after
    row 2's chunk freed the value, so an in-step target meets nothing there."""
    changes = [upd(1 << ROW_BITS, (2,), row(2, 7)), upd(2 << ROW_BITS, (1,), row(1, 5))]
    found = kinds(changes, size=1)
    assert [text.split()[0] for text in found] == ["SELECT", "INSERT", "SELECT", "INSERT"]
    assert "(`slot`) IN ((7))" in found[0] and "(2,7," in found[1].replace(" ", "")
    assert "(`slot`) IN ((5))" in found[2] and "(1,5," in found[3].replace(" ", "")


def test_rows_read_and_the_streams_together() -> None:
    changes = [ins(READ_BIT, row(1, 5)), upd(1 << ROW_BITS, (2,), row(2, 6))]
    assert len(looked(kinds(changes, frozenset(), reads=True))) == 1  # the row read only
    found = kinds(changes, reads=True)
    assert len(looked(found)) == 1 and "((5), (6))" in looked(found)[0]


def test_the_door_says_which_tables_wait() -> None:
    door = DoorQueue.__new__(DoorQueue)
    door._lock, door._rows, door.central = threading.Lock(), [], None  # type: ignore[assignment]
    door._scan_after = door._scan_until = 0
    door_module.table_named.cache_clear()
    door.compiled = SimpleNamespace(  # type: ignore[assignment]
        stored=lambda schema, table: (schema.lower(), table.lower()))
    assert door.tables() == set()
    door._rows = [SimpleNamespace(after={"FULL_NAME": "`S`.`t`"}),  # type: ignore[assignment]
                  SimpleNamespace(after={"FULL_NAME": "nothing"})]
    assert door.tables() == {("s", "t")}
    door._scan_until = 3  # kept in retl_pending, not read yet: of any table
    assert door.tables() is None
    door._scan_until = 0
    door.central = SimpleNamespace(seen_waiting=False, pending=0)  # type: ignore[assignment]
    assert door.tables() == {("s", "t")}
    door.central.seen_waiting = True  # type: ignore[attr-defined]
    assert door.tables() is None


def test_the_door_parses_each_full_name_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """tables() runs per stream batch over every request held (tens of thousands in a
    backfill): a FULL_NAME is parsed once, not per request and batch; the same answer, and
    the names kept are bounded."""
    door = DoorQueue.__new__(DoorQueue)
    door._lock, door.central = threading.Lock(), None  # type: ignore[assignment]
    door._scan_after = door._scan_until = 0
    door_module.table_named.cache_clear()
    door.compiled = SimpleNamespace(  # type: ignore[assignment]
        stored=lambda schema, table: (schema.lower(), table.lower()))
    names = ["`S`.`t`", "s.u", "nothing", "`S`.`t`"]
    door._rows = [SimpleNamespace(after={"FULL_NAME": names[i % 4]})  # type: ignore[assignment]
                  for i in range(2_000)] + [SimpleNamespace(after=None)]
    parsed: list[str] = []
    split = door_module.identifiers.split_qualified
    monkeypatch.setattr(door_module.identifiers, "split_qualified",
                        lambda text: parsed.append(text) or split(text))
    for _ in range(3):
        assert door.tables() == {("s", "t"), ("s", "u")}
    assert sorted(parsed) == sorted(["`S`.`t`", "s.u", "nothing", ""])
    door._rows = [SimpleNamespace(after={"FULL_NAME": f"s.t{i}"})  # type: ignore[assignment]
                  for i in range(door_module.NAMES_KEPT + 10)]
    assert door.tables() == {("s", f"t{i}") for i in range(door_module.NAMES_KEPT + 10)}
    assert door_module.table_named.cache_info().currsize <= door_module.NAMES_KEPT


def test_the_tables_being_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    found, _, _ = snapshots(monkeypatch)
    found.door.tables = lambda: set()  # type: ignore[attr-defined]
    copying = found.copying()
    assert copying("shop", "t") and copying("shop", "u") and not copying("shop", "v")
    found.copies = [copy_of("t", set())]
    found.copies[0].state = "done"
    found._pending.clear()
    found._requested = frozenset({("shop", "w")})
    found.door.tables = lambda: {("shop", "x")}  # type: ignore[attr-defined]
    copying = found.copying()
    assert [name for name in "tuwx" if copying("shop", name)] == ["w", "x"]
    found._pending[8] = Window(8, [Work(asked=SimpleNamespace(  # type: ignore[arg-type]
        schema="shop", table="y"))])
    assert found.copying()("shop", "y")
    found.door.tables = lambda: None  # type: ignore[attr-defined]
    assert found.copying()("any", "table")


def test_a_1062_pause_says_what_is_wrong_and_what_to_do() -> None:
    text = duplicate.explained("shop.forward",
                               "table s.t: Duplicate entry '5' for key 'slot'")
    assert text.startswith("table s.t: Duplicate entry '5' for key 'slot'. ")
    assert "out of step" in text
    assert "setl snapshot shop --table s.t" in text
    assert "setl verify shop --table s.t --repair" in text
    assert "resume the channel" in text
    assert "setl snapshot a.b --table SCHEMA.TABLE" in duplicate.explained(
        "a.b.forward", "Duplicate entry '5' for key 'slot'")
    assert {1062, 1169} <= duplicate.DUPLICATE


def test_a_two_way_pipelines_1062_pause_says_what_mends_it_there() -> None:
    """A two-way pipeline's stream looks nothing up and its channel takes no copy nor
    repair: its pause says neither, and to free the value on the target instead."""
    error = "table s.t: Duplicate entry '5' for key 'slot'"
    one_way = duplicate.explained("shop.forward", error)
    assert "while a copy of the table runs, the stream's writes into it remove" in one_way
    text = duplicate.explained("shop.forward", error, "dst", lambda target: [("shop", "t")],
                               two_way=True)
    assert text.startswith(error + ". ")
    assert "while a copy" not in text and "remove the target row in their way" not in text
    assert "setl snapshot shop --table" not in text and "--repair," not in text
    assert "Free the value on the target: give the target row holding it another value of " \
        "that key" in text and "a delete would remove the row on both sides" in text
    assert "crosses to the source side" in text
    assert "setl verify shop --table shop.t shows the rows that differ" in text
    assert "then resume the channel" in text


def test_load_says_whether_its_pipeline_is_two_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Load's 1062 pause takes the two-way text where the loader marks loops."""
    seen: list[bool] = []
    monkeypatch.setattr(duplicate, "explained", lambda *args, two_way=False: (
        seen.append(two_way), "explained")[1])
    for loop in (None, SimpleNamespace(channel="shop")):
        load = loader_module.Loader.__new__(loader_module.Loader)
        load.pipeline_id, load.loop, load.sources = "shop.forward", loop, None
        load.retry = loader_module.RetryPolicy(max_tries=1, delay_s=0, max_delay_s=0)
        load.params = SimpleNamespace(skip_load_exception=False)
        load.stop = threading.Event()
        load._discard = lambda name: None  # type: ignore[method-assign]

        def refused(*args: Any) -> int:
            raise pymysql.err.IntegrityError(1062, "Duplicate entry '5' for key 'slot'")
        load._transaction = refused  # type: ignore[method-assign]
        writes = SimpleNamespace(prepare=lambda loader: None)
        with pytest.raises(loader_module.LoadError, match="explained"):
            load._load_target("dst", SimpleNamespace(  # type: ignore[arg-type]
                process_id=1, end="b.1:4"), writes)  # type: ignore[arg-type]
    assert seen == [False, True]


def test_a_1062_pause_names_the_source_tables_the_commands_take() -> None:
    """The commands take source tables: a target table a pair renames is named by its
    source's name; one several feed, by each."""
    text = "table dw.g: Duplicate entry '5' for key 'slot'"
    asked: list[Any] = []

    def one(target: Any) -> list[tuple[str, str]]:
        asked.append(target)
        return [("shop", "t1")]
    found = duplicate.explained("c.forward", text, "dst", one)
    assert asked == [("dst", "dw", "g")]
    assert "setl snapshot c --table shop.t1 (" in found
    assert "setl verify c --table shop.t1 --repair" in found and "table dw.g already" in found
    two = duplicate.explained("c.forward", text, "dst",
                              lambda target: [("shop", "t1"), ("shop", "t2")])
    assert "--table shop.t1 (and so for shop.t2, which feed it too)" in two
    assert "--table dw.g " in duplicate.explained("c.forward", text, "dst", lambda t: [])


def test_a_table_with_foreign_keys_deletes_the_rows_found_with_checks_off() -> None:
    """A run with foreign_key_checks on (the stream's): the rows removed to be copied again
    fire no ON DELETE action (a child would be lost, or the delete refused); the run's
    checks on again right after."""
    facts = {T: dataclasses.replace(SLOT[T], foreign_keys=True,  # (a child names slot)
                                    referenced=(frozenset({"slot"}),))}
    spec = JobSpec(1, False, facts, load_batch_size=10,  # type: ignore[arg-type]
                   reads=False, copying=frozenset({T}))
    [lookup] = [sql for unit in render([upd(1 << ROW_BITS, (1,), row(1, 5))], spec)
                for sql in unit.sqls if displaced.marked(sql)]
    assert lookup.what.unchecked
    cursor = FakeCursor([(2, 0, 0, None)])  # (key, inside, first taker, first writer)
    unit = Unit("dst", "s", "t", 0, 0, [], 0, ("id",))
    assert displaced.write(cursor, unit, lookup, "c.p", 4, lambda *found: None) == 1
    assert [text for text, _ in cursor.executed[1:]] == [
        "SET SESSION foreign_key_checks = 0", lookup.what.delete,
        "SET SESSION foreign_key_checks = 1"]
    [plain] = [sql for unit in render([upd(1 << ROW_BITS, (1,), row(1, 5))], dataclasses.replace(
        spec, facts=SLOT)) for sql in unit.sqls if displaced.marked(sql)]
    assert not plain.what.unchecked


def looked_up(changes: list[Any], reads: bool = False) -> list[Any]:
    spec = JobSpec(1, False, SLOT, load_batch_size=100, reads=reads,  # type: ignore[arg-type]
                   copying=frozenset({T}))
    return [sql for unit in render(changes, spec) for sql in unit.sqls if displaced.marked(sql)]


def deleted(sql: Any, found: list[tuple[Any, ...]]) -> str:
    """The DELETE Load runs after ``sql``'s look-up found ``found`` (key, inside, the place
    of the first row taking its value, of the first stream row writing its key)."""
    cursor = FakeCursor(found)
    displaced.write(cursor, Unit("dst", "s", "t", 0, 0, [], 0, ("id",)), sql, "c.p", 1,
                    lambda *_: None)
    return cursor.executed[-1][0]


def test_the_delete_spares_a_row_the_streams_statements_move_aside_first() -> None:
    """In step, row 2 gives slot 6 up, then row 1 takes it: the look-up meets row 2, which
    the chunk moves aside first; deleting it lost its target-only columns and cascades (a
    review). Out of step, row 1 takes slot 5 a stale row 2 holds before the chunk writes row
    2: deleted (its upsert would update row 2 with row 1's values)."""
    [swap] = looked_up([upd(1 << ROW_BITS, (2,), row(2, 7)), upd(2 << ROW_BITS, (1,), row(1, 6))])
    assert "CASE WHEN (`slot`) = (7) THEN 0 WHEN (`slot`) = (6) THEN 1 END, CASE WHEN " \
        "(`id`) = (2) THEN 0 WHEN (`id`) = (1) THEN 1 END FROM" in swap.text
    assert deleted(swap, [(2, 1, 1, 0)]).endswith("AND (`id`) NOT IN ((2))")
    # the key as the server returns it need not equal the stream's (a big5 text, a FLOAT, a
    # BIT: such rows were deleted and written again — a review): spared by the places, the
    # stream's own text excluded
    assert deleted(swap, [(b"\x02", 1, 1, 0)]).endswith("AND (`id`) NOT IN ((2))")
    [stale] = looked_up([upd(1 << ROW_BITS, (1,), row(1, 5)), upd(2 << ROW_BITS, (2,), row(2, 7))])
    assert deleted(stale, [(2, 1, 0, 1)]) == stale.what.delete
    [outside] = looked_up([upd(1 << ROW_BITS, (1,), row(1, 5))])  # row 9 holds 5: asked again
    assert deleted(outside, [(9, 0, 0, None)]) == outside.what.delete
    [read] = looked_up([ins(READ_BIT, row(2, 7)), ins(READ_BIT + 1, row(1, 6))], reads=True)
    assert deleted(read, [(2, 1, 1)]) == read.what.delete  # a row read: written whole
