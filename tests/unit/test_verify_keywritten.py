"""Verify of a target whose key a virtual column writes (``a: a + 1000``): the target is
looked up by the key each source row's transformed image writes, and its rows are known by
the source key again (differences, settling and repair speak of source keys); a key with no
row on the source writes none and is not looked up there."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from node.extract.chunks import SplitKey
from node.verify.plan import TablePlan, Target
from node.verify.readers import RowsReader, Side, differing
from node.verify.values import Column, add_row, row_hash

KEY = SplitKey("s", "kl", ("a",), "int")
COLUMNS = (Column("a", "int", "int(11)", None, False, False),
           Column("v", "varchar", "varchar(9)", "utf8mb4"))
TARGET = Target("tgt", "s", "kl", ("a",), COLUMNS, frozenset({"a", "v"}), "a",
                "its key column(s) a are written by virtual columns", key_written=True)
T = TARGET.id


class Cursor:
    """Gives the rows it was made with, whatever is asked; keeps what was asked."""

    def __init__(self, rows: Sequence[tuple[Any, ...]]) -> None:
        self.rows, self.params = list(rows), []
        self.description = [("a",), ("v",)]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.params = list(params)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self.rows)


def expected(rows: list[dict[str, Any]]) -> Side:
    """The source side as RowsReader.source makes it: source key a, written key a + 1000."""
    side = Side()
    for row in rows:
        written = {**row, "a": row["a"] + 1000}
        add_row(side.expected.setdefault((row["a"],), {}), T,
                row_hash(written, ("a", "v"), TARGET.kinds))
        side.write((row["a"],), T, (written["a"],))
    return side


def test_rows_are_looked_up_by_the_written_key_and_known_by_the_source_key() -> None:
    reader = RowsReader(TablePlan("c.p", KEY, "rows", (TARGET,), COLUMNS), None)
    side = expected([{"a": 1, "v": "x"}, {"a": 2, "v": "y"}])
    assert side.lookups(TARGET, [(1,), (2,), (3,)]) == [((1001,), (1,)), ((1002,), (2,))]
    cursor = Cursor([(1001, "x"), (1002, "changed")])
    found = reader.target_keys(cursor, TARGET, [(1,), (2,), (3,)], side)
    assert sorted(cursor.params) == [1001, 1002]  # (3,): no source row, no key to look up
    assert set(found) == {(1,), (2,)}
    assert set(differing(side, {T: found})) == {(2,)}
    plain = dataclasses.replace(TARGET, key_written=False, blind="")
    assert side.lookups(plain, [(1,), (3,)]) == [((1,), (1,)), ((3,), (3,))]


def test_a_batch_merged_keeps_the_written_keys() -> None:
    side, more = Side(), expected([{"a": 5, "v": "z"}])
    side.merge(more)
    assert side.written == {((5,), T): (1005,)} and side.writers == {T: {(1005,): (5,)}}
    assert side.rows == more.rows and side.expected == more.expected
