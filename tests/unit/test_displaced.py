"""node/target/mysql/displaced.py: rows a window read into a table with another unique key
are preceded by the look-up of the target rows that hold their unique values under another
key; Load deletes what it finds and hands the keys outside the chunk to the free door. The
stream's SQL is unchanged."""

from __future__ import annotations

import re
from typing import Any

import pytest

from node.jobs import READ_BIT, ROW_BITS, JobSpec, Unit
from node.target.mysql import displaced
from node.target.mysql.facts import TableFacts
from node.target.mysql.render import Column
from node.target.mysql.sqltext import Sql
from node.target.mysql.units import render
from tests.unit.test_merge import ins, upd

COLUMNS = {"id": Column("int", None), "slot": Column("int", None),
           "note": Column("varchar", "utf8mb4")}
SLOT = {("dst", "s", "t"): TableFacts(COLUMNS, (frozenset({"id"}), frozenset({"slot"})))}
READ = READ_BIT  # a seq of a row a window read (place 0)


def texts(changes: list[Any], facts: dict[Any, TableFacts] = SLOT, size: int = 100
          ) -> list[str]:
    spec = JobSpec(1, False, facts, load_batch_size=size)  # type: ignore[arg-type]
    return [sql.text for unit in render(changes, spec) for sql in unit.sqls]


def row(i: int, slot: int | None) -> dict[str, Any]:
    return {"id": i, "slot": slot, "note": f"n{i}"}


def test_the_streams_rows_go_as_before() -> None:
    changes = [ins(1 << ROW_BITS, row(1, 5)), upd(2 << ROW_BITS, (1,), row(1, 6))]
    assert not any(text.startswith(displaced.MARK) for text in texts(changes))


def test_rows_read_are_preceded_by_the_look_up_of_the_rows_they_would_land_on() -> None:
    """A stream row, two rows read, a stream row: the look-up goes right before the rows
    read, pairing each unique value with its own key."""
    changes = [ins(1 << ROW_BITS, row(1, 1)), ins((3 << ROW_BITS) - 2, row(2, 5)),
               ins((3 << ROW_BITS) - 1, row(3, 6)), ins(3 << ROW_BITS, row(4, 7))]
    assert changes[1].seq & READ and changes[2].seq & READ
    found = texts(changes)
    assert [text.split()[0] for text in found] == ["INSERT", "SELECT", "INSERT", "INSERT"]
    [look_up] = [sql for unit in render(changes, JobSpec(  # type: ignore[arg-type]
        1, False, SLOT, load_batch_size=100)) for sql in unit.sqls if sql.text == found[1]]
    assert look_up.what == displaced.Lookup(
        "DELETE FROM `s`.`t` WHERE (`slot`) IN ((5), (6)) AND (`slot`, `id`) NOT IN "
        "((5, 2), (6, 3))", "(`slot`)", [(2,), (3,)], key_list="`id`",
        by_values={(5,): (2,), (6,): (3,)})
    assert found[1] == (
        f"{displaced.MARK}`id`, (`id`) IN ((2), (3)), `slot` FROM `s`.`t` WHERE (`slot`) IN "
        "((5), (6)) AND (`slot`, `id`) NOT IN ((5, 2), (6, 3)) FOR UPDATE")
    assert "(2,5,'n2'),(3,6,'n3')" in found[2].replace(" ", "")


def test_a_look_up_per_statement_chunk_and_none_for_null_values() -> None:
    changes = [ins(READ + i, row(i, None if i == 2 else i)) for i in range(1, 4)]
    found = [text for text in texts(changes, size=2) if text.startswith(displaced.MARK)]
    assert len(found) == 2
    assert "(`slot`) IN ((1)) AND (`slot`, `id`) NOT IN ((1, 1))" in found[0]  # 2: NULL
    assert "(`slot`) IN ((3))" in found[1]
    assert not any(text.startswith(displaced.MARK)
                   for text in texts([ins(READ, row(1, None))]))


def test_no_look_up_where_no_other_unique_key_can_be_met() -> None:
    only_key = {("dst", "s", "t"): TableFacts(COLUMNS, (frozenset({"id"}),))}
    wider = {("dst", "s", "t"): TableFacts(COLUMNS, (frozenset({"id"}),
                                                     frozenset({"id", "slot"})))}
    for facts in (only_key, wider):
        assert not any(text.startswith(displaced.MARK)
                       for text in texts([ins(READ, row(1, 5))], facts))


class FakeCursor:
    def __init__(self, found: list[tuple[Any, ...]]) -> None:
        self.found, self.executed = found, []  # type: ignore[var-annotated]

    def execute(self, sql: str, args: Any = None) -> int:
        self.executed.append((sql, args))
        return len(self.found) if sql.startswith("DELETE") else 0  # (the rows it affects)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.found


def test_load_deletes_what_it_finds_and_asks_again_for_the_rows_outside_the_chunk() -> None:
    unit = Unit("dst", "s", "t", 0, 0, [], 0, ("id",))
    asked: list[Any] = []
    cursor = FakeCursor([(7, 0, 5), (3, 1, 6)])  # 7: outside the chunk; 3: a row of it
    sql = Sql(f"{displaced.MARK}... FOR UPDATE", 0, what=displaced.Lookup(
        "DELETE FROM ...", "(`slot`)", [(1,), (9,)], by_values={(5,): (1,), (6,): (9,)}))
    assert displaced.write(cursor, unit, sql, "c.p", 4,
                           lambda *found: asked.append(found)) == 2
    assert cursor.executed == [(sql.text, None), ("DELETE FROM ...", None)]
    assert asked == [(("dst", "s", "t"), ("id",), [displaced.Moved((7,), (1,), "(`slot`)")],
                      4)]
    nothing = FakeCursor([])
    assert displaced.write(nothing, unit, sql, "c.p", 4, None) == 0
    assert len(nothing.executed) == 1  # the look-up alone


@pytest.mark.parametrize(("pairs", "target", "asked", "doubt"), [
    # a shard family gathered into one table: its tables' names are not the target's
    (["{source: {namespace: shop, table: 'orders_[0-3]'}, target: dw.orders}"],
     "orders", [], True),
    (["{source: shop.orders, target: dw.orders}",
      "{source: {namespace: shop, table: 'orders_[0-3]'}, target: dw.orders}"],
     "orders", [("shop", "orders", [0])], True),
    # a template: shop.orders goes to dw.ods_orders, beside a table named so
    (["{source: shop.archive, target: dw.ods_orders}",
      "{source: {namespace: shop, table: 're:.*'}, target: {namespace: dw, table: "
      "'ods_{table}'}}"], "ods_orders", [("shop", "archive", [0])], True),
    # an identity pattern: the target's own name is the source's
    (["{source: {namespace: shop, table: 're:.*'}, target: {namespace: dw, table: '{table}'}}"],
     "orders", [("shop", "orders", [0])], False),
    (["{source: shop.a, target: dw.t}", "{source: shop.b, target: dw.t}"], "t",
     [("shop", "a", [0]), ("shop", "b", [0])], False),
    (["{source: shop.a, target: dw.t}",
      "{source: {namespace: shop, table: 'x_[0-3]'}, target: dw.other}"], "t",
     [("shop", "a", [0])], False),
])
def test_a_displaced_rows_source_tables_and_the_pairs_that_cannot_be_worked_back(
        pairs: list[str], target: str, asked: list[Any], doubt: bool) -> None:
    """Each table a simple pair feeds the target from is asked; a pair taking tables by a
    pattern whose names the target's does not give back makes the door warn (a review: a
    family's rows were asked of the single pair's table only, and nothing said so)."""
    from node.snapshot.sourceof import source_names, sources_of, unsure
    from tests.unit.test_etl import compiled
    found = compiled(*pairs)
    assert [one[:3] for one in sources_of(found, ("dst", "dw", target), ("id",))] == asked
    # (what a 1062 pause names: the same tables, whatever their keys)
    assert source_names(found, ("dst", "dw", target)) == [(s, t) for s, t, _ in asked]
    assert unsure(found, ("dst", "dw", target)) is doubt


@pytest.mark.parametrize(("moved", "why"), [
    ('{source: shop.b, target: dw.t, virtual_columns: [{name: id, expression: "id + 1000"}]}',
     "virtual column(s) id write the target's key"),
    ("{source: shop.b, target: dw.t, processor: 'setl_examples:skip_test_rows'}",
     "a processor writes its rows"),
])
def test_a_displaced_row_a_pair_that_cannot_be_asked_may_own_stops_the_batch(
        moved: str, why: str) -> None:
    """Tables gathered into one target, one pair's rows not askable by the target's key (a
    virtual column moving its key, a processor): a displaced row may be its, and asked of
    the simple pair's table alone it came back missing and was deleted for good (a review).
    The door stops instead where the simple pairs' tables hold none of the row (read first:
    a row one holds is asked as before), naming the table, the pair, the key and why; a
    virtual column leaving the key alone is asked as a simple pair is."""
    from node.snapshot.sourceof import Source, sources_of, stopped, unaskable
    from tests.unit.test_etl import compiled
    found = compiled("{source: shop.a, target: dw.t}", moved)
    not_asked = unaskable(found, ("dst", "dw", "t"), ("id",))
    assert [(str(entry.pair.source), reason) for entry, reason in not_asked] == [
        ("src:shop.b", why)]
    asked = sources_of(found, ("dst", "dw", "t"), ("id",))
    assert asked == [Source("shop", "a", [0], ("id",))]  # (the door reads its rows first)
    message = str(stopped(found, ("dst", "dw", "t"), not_asked, asked, [(7,), (8,)]))
    assert re.search(r"table dw\.t: .*pair src:shop\.b -> dst:dw\.t \(" + re.escape(why),
                     message)
    assert "the row of key [7] and 1 more is held by none of the tables the door asks " \
        "(`shop`.`a`)" in message
    assert unaskable(found, ("dst", "dw", "other"), ("id",)) == []  # (another table)
    kept = compiled("{source: shop.a, target: dw.t}", '{source: shop.b, target: dw.t, '
                    'virtual_columns: [{name: full, expression: "concat(id, \'!\')"}]}')
    assert unaskable(kept, ("dst", "dw", "t"), ("id",)) == []
    assert [one[:3] for one in sources_of(kept, ("dst", "dw", "t"), ("id",))] == [
        ("shop", "a", [0]), ("shop", "b", [0])]


def test_a_door_that_stops_the_batch_leaves_the_rows_undeleted() -> None:
    """The hook raises (another feeder, a key displaced twice): no DELETE is sent."""
    unit = Unit("dst", "s", "t", 0, 0, [], 0, ("id",))
    cursor = FakeCursor([(7, 0, "Ab")])  # (met as the collation does: no key to name)
    sql = Sql(f"{displaced.MARK}... FOR UPDATE", 0, what=displaced.Lookup(
        "DELETE FROM ...", "(`name`)", [(1,)], by_values={("ab",): (1,)}))
    moved: list[Any] = []

    def stop(target: Any, keys: Any, found: list[Any], process_id: int) -> None:
        moved.extend(found)
        raise displaced.DisplacedError("stop")
    with pytest.raises(displaced.DisplacedError):
        displaced.write(cursor, unit, sql, "c.p", 4, stop)
    assert cursor.executed == [(sql.text, None)]
    assert moved == [displaced.Moved((7,), None, "(`name`)")]  # (met as the collation does)


def test_a_look_up_that_would_not_fit_the_packet_goes_with_a_smaller_chunk() -> None:
    """1,000 rows read whose unique values are long: the chunk's look-up over the target's
    max_allowed_packet was refused at every try, the pipeline stalled (a review). The chunk
    is halved until each look-up fits, each half's look-up right before its own rows."""
    columns = {"id": Column("int", None), "slot": Column("varchar", "utf8mb4"),
               "note": Column("varchar", "utf8mb4")}
    packet = 1 << 20
    facts = {("dst", "s", "t"): TableFacts(columns, (frozenset({"id"}), frozenset({"slot"})),
                                           packet=packet)}
    changes = [ins(READ + i, {"id": i, "slot": f"{i:04}" + "x" * 3000, "note": ""})
               for i in range(1000)]
    found = texts(changes, facts, size=1000)
    looks = [text for text in found if text.startswith(displaced.MARK)]
    assert len(looks) > 1
    assert all(len(text.encode()) <= displaced.room(packet) for text in looks)
    assert [text.split()[0] for text in found[:2]] == ["SELECT", "INSERT"]
    written = "".join(text for text in found if text.startswith("INSERT"))
    assert all(f"'{i:04}x" in written for i in range(1000))
    assert sum(text.count(f"'{i:04}x") for text in looks for i in (0, 999)) == 4  # IN, NOT IN
