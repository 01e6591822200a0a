"""Verify of a table whose key need not be unique (a keyless table compared by its pair's
``key_columns``): a key's rows compare as a multiset on each side, so a row held twice, or
lost beside a row alike, is a difference; the chunk sums of such a table are sums, in which
two rows alike do not cancel out as in an XOR; and the re-check keeps them apart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from node.extract.chunks import SplitKey
from node.verify.plan import TablePlan, Target
from node.verify.readers import Key, RowsReader, Side, SqlReader, differing
from node.verify.repair import requests_for, twice
from node.verify.report import counts_differ
from node.verify.settle import Seen, kinds, settle
from node.verify.values import Column, add_row, row_hash
from shared.model import BinlogPosition

KEY = SplitKey("s", "kl", ("a",), "int")
COLUMNS = (Column("a", "int", "int(11)", None, False, False),
           Column("v", "varchar", "varchar(9)", "utf8mb4"))
TARGET = Target("tgt", "s", "kl", ("a",), COLUMNS, frozenset({"a", "v"}), "a", "",
                ("a", "v"), ("a", "v"), (False, True), ("int", "text"))
T = TARGET.id


class Cursor:
    """Gives the rows it was made with, whatever is asked; keeps the last query."""

    def __init__(self, rows: Sequence[tuple[Any, ...]], names: Sequence[str] = ("a", "v")
                 ) -> None:
        self.rows, self.sql = list(rows), ""
        self.description = [(name,) for name in names]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.sql = sql

    def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self.rows)


def sql_reader(unique: bool = False) -> SqlReader:
    return SqlReader(TablePlan("c.p", KEY, "sql", (TARGET,), COLUMNS, unique=unique), None)


def compared(reader: Any, source: list[tuple], target: list[tuple]) -> dict:
    side = reader.source(Cursor(source), "TRUE", [])
    return differing(side, {T: reader.target(Cursor(target), TARGET, "TRUE", [], side)})


def test_a_row_lost_beside_another_held_twice_differs_by_the_sql_method() -> None:
    """Source (1,'x'), (1,'y'); target (1,'y') twice (hashed by the databases: 111 for x,
    222 for y). The target's rows were taken by key, last row winning: equal."""
    reader = sql_reader()
    assert compared(reader, [(1, 111), (1, 222)], [(1, 222), (1, 222)]) == {
        (1,): (frozenset({(T, (111, 222))}), frozenset({(T, (222, 222))}))}
    # a keyless insert replayed: the row once on the source, twice on the target; and lost
    assert compared(reader, [(2, 333)], [(2, 333), (2, 333)]) == {
        (2,): (frozenset({(T, (333,))}), frozenset({(T, (333, 333))}))}
    assert compared(reader, [(2, 333), (2, 333)], [(2, 333)]) == {
        (2,): (frozenset({(T, (333, 333))}), frozenset({(T, (333,))}))}
    assert compared(reader, [(1, 222), (1, 111), (2, 3)], [(1, 111), (1, 222), (2, 3)]) == {}


def test_a_row_held_twice_differs_by_the_rows_method() -> None:
    plan = TablePlan("c.p", KEY, "rows", (TARGET,), COLUMNS, unique=False)
    reader = RowsReader(plan, None)  # (no pipeline: the source side made by hand below)
    side, by = Side(), TARGET.kinds
    for row in ({"a": 1, "v": "x"}, {"a": 1, "v": "y"}):  # as Extract/Transform gives them
        add_row(side.expected.setdefault((1,), {}), T, row_hash(row, ("a", "v"), by))
    found = reader.target(Cursor([(1, "y"), (1, "y")]), TARGET, "TRUE", [], side)
    assert found[(1,)] == (row_hash({"a": 1, "v": "y"}, ("a", "v"), by),) * 2
    assert set(differing(side, {T: found})) == {(1,)}
    again = reader.target(Cursor([(1, "y"), (1, "x")]), TARGET, "TRUE", [], side)
    assert differing(side, {T: again}) == {}


def test_the_chunk_sums_of_a_key_that_need_not_be_unique_are_sums() -> None:
    """XOR: {a, a} and {b, b} both 0, with the same count; a sum tells them apart."""
    for unique, aggregate in ((True, "BIT_XOR("), (False, "SUM(")):
        reader = sql_reader(unique)
        source = Cursor([(2, 0)])
        reader.sums(source, "TRUE", [])
        target = Cursor([(2, 0)])
        reader.target_sums(target, TARGET, "TRUE", [])
        assert aggregate in source.sql and aggregate in target.sql
        assert ("BIT_XOR(" in source.sql) is unique


class Held:
    """The source's rows of a key (hashes) and the target's, for the re-check."""

    def __init__(self, source: dict[Key, tuple[int, ...]], target: dict[Key, tuple[int, ...]]
                 ) -> None:
        self.source_rows, self.target_rows = source, target

    def source(self, keys: Sequence[Key]) -> tuple[BinlogPosition, Side]:
        side = Side()
        side.expected = {key: {T: self.source_rows[key]} for key in keys}
        return BinlogPosition("bin.000001", 4), side

    def release(self) -> None:
        pass

    def targets(self, keys: Sequence[Key], side: Side) -> dict:
        return {key: (side.signature(key), frozenset({(T, self.target_rows[key])}))
                for key in keys}


def test_the_recheck_confirms_a_key_whose_rows_differ_in_number() -> None:
    world = Held({(1,): (5,), (2,): (7, 7)}, {(1,): (5, 5), (2,): (7, 7)})
    pending = {key: Seen(frozenset({(T, rows)}), frozenset({(T, world.target_rows[key])}),
                         True) for key, rows in world.source_rows.items()}
    outcome = settle(pending, world, lambda at, limit: True)
    assert set(outcome.confirmed) == {(1,)} and not outcome.unsettled
    seen = outcome.confirmed[(1,)]
    assert kinds(seen) == [("different", T)] and counts_differ(seen)
    # repair (for a table keyed by its own key, a target without one): all rows, then one
    assert twice(seen) and requests_for(outcome.confirmed) == [("D", (1,)), ("I", (1,))]
    assert not counts_differ(Seen(frozenset({(T, (1,))}), frozenset({(T, (2,))}), True))
