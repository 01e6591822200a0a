"""Which rows of a batch the displaced-row look-up (:mod:`node.target.mysql.displaced`) is
for, and over which unique indexes: rows a window read into a table with a unique key besides
theirs, and the stream's whole-row upserts into such a table whose copy is unfinished."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from node.changes import ChangeType, Row, TargetChange
from node.jobs import READ_BIT
from node.merge import PartialRow
from node.target.mysql.facts import TableFacts, Target

Index = tuple[tuple[str, int], ...]  # a unique index: its columns, each with its prefix length


def read_rows(changes: Iterable[TargetChange], facts: dict[Target, Any],
              copying: frozenset[Target] = frozenset()) -> dict[Target, dict[int, bool]]:
    """The rows (by ``id`` of their image: merging keeps it) a window read into a target
    table with a unique key besides theirs, by table, and the stream's rows (inserts and
    updates that keep their key) into such a table of ``copying`` (its copy unfinished: a
    target row out of step may hold their unique values), each with whether a window read
    it; empty for a batch of the stream where no table is copied."""
    found: dict[Target, dict[int, bool]] = {}
    tables: dict[Target, bool] = {}
    for change in changes:
        if change.after is None or not (
                change.type is ChangeType.INSERT if change.seq & READ_BIT else
                copying and streamed(change, copying)):
            continue
        name = (change.datasource, change.schema, change.table)
        other = tables.get(name)
        if other is None:
            table = facts.get(name)
            other = tables[name] = isinstance(table, TableFacts) and \
                bool(others(table, change.keys))
        if other:
            found.setdefault(name, {})[id(change.after)] = bool(change.seq & READ_BIT)
    return found


def streamed(change: TargetChange, copying: frozenset[Target]) -> bool:
    """Whether a change of the stream is an upsert of a whole row into a table of
    ``copying``: an insert, or an update that keeps its key (a key change is a ``MOVE``, and a
    column-group update writes a part of a row, which the look-up does not take)."""
    if (change.datasource, change.schema, change.table) not in copying or \
            isinstance(change.after, PartialRow) or change.after is None:
        return False
    if change.type is ChangeType.INSERT:
        return True
    return change.type is ChangeType.UPDATE and change.before_key == tuple(
        change.after.get(key) for key in change.keys)


def others(table: TableFacts, keys: tuple[str, ...]) -> list[Index]:
    """The target's unique keys a row of another key may hold a value of: each but those
    over every key column whole (two rows of different keys always differ there; not
    where a key column's prefix alone is indexed)."""
    named = frozenset(key.lower() for key in keys)
    found = set()
    for index in indexes(table):
        whole = frozenset(column.lower() for column, prefix in index if not prefix)
        if not named <= whole:
            found.add(index)
    return sorted(found)


def indexes(table: TableFacts) -> list[Index]:
    """Each unique index's columns (in index order), each with its prefix length."""
    if table.parts:
        return [tuple((column, int(prefix)) for column, prefix in index)
                for index in table.parts]
    return [tuple((column, 0) for column in sorted(index)) for index in table.unique]


def unseen(table: TableFacts, keys: tuple[str, ...], row: Row) -> list[Index]:
    """The unique keys the look-up cannot compare for rows like ``row``: over a column
    they do not carry (an unmapped one: the target's default) or one the target generates
    (its own expression, which the rows' value need not be) — but the AUTO_INCREMENT
    column uncarried (an insert's new value meets no row)."""
    carried = frozenset(name.lower() for name in row)
    generated = frozenset(name.lower() for name, column in table.columns.items()
                          if column.generated)
    fresh = table.increment.lower() if table.increment.lower() not in carried else ""
    return [index for index in others(table, keys)
            if not any(column.lower() == fresh for column, _ in index)
            and any(column.lower() not in carried or column.lower() in generated
                    for column, _ in index)]
