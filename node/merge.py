"""Merge the target changes of one batch per target primary key (Otter's rules).

Each key ends the batch either deleted or holding one row, so the net effect is written
with one DELETE per deleted key and one upsert per surviving row:

- I + U → I (the last row wins), U + U → U, D + I → upsert;
- I + D → nothing (the key was born and died inside the batch);
- an update that changes the key deletes the old key and upserts the new one; a DELETE is
  written only for a key that existed before the batch, so the chain (1→2, 2→3), where 1
  existed, ends as "delete 1, upsert 3" (2 was born inside the batch).

Upserts keep the order of each key's last change, and a table's deletes run before its
upserts, so a unique value freed by a delete is free when a later insert takes it.
Tables are written in ascending ``push_weight``, then in order of first appearance.

A table with a unique key besides its primary key is not merged: two rows can pass a unique
value between them inside one batch (row 1 gives up code 16, row 3 takes it), and writing the
net rows in any other order than the source's lets an upsert land on the wrong row. Such a
table is written as ``steps``, every change in source order (deletes and upserts of
consecutive changes still go out as multi-row statements), which the source has proven valid.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from node.changes import ChangeType, Row, TargetChange

_DELETED = None


@dataclass
class TableWrites:
    datasource: str
    schema: str
    table: str
    keys: tuple[str, ...]
    push_weight: int
    first_seq: int
    deletes: list[tuple[Any, ...]] = field(default_factory=list)
    upserts: list[Row] = field(default_factory=list)
    steps: list[tuple[bool, Any]] = field(default_factory=list)  # (upsert?, row or key)
    changes: list[TargetChange] = field(default_factory=list)  # a keyless table's, in order

    @property
    def rows(self) -> int:
        return len(self.deletes) + len(self.upserts) + len(self.steps) + len(self.changes)


@dataclass
class _KeyState:
    seq: int
    row: Row | None  # None: deleted
    born: bool  # the first change of this key in the batch created it


def merge(changes: Iterable[TargetChange],
          ordered: Collection[tuple[str, str, str]] = ()) -> list[TableWrites]:
    """The batch's writes per table; tables named in ``ordered`` (datasource, schema, table)
    keep every change in source order instead of being merged per key."""
    tables: dict[tuple[str, str, str], TableWrites] = {}
    states: dict[tuple[str, str, str], dict[tuple[Any, ...], _KeyState]] = {}
    for change in sorted(changes, key=lambda c: c.seq):
        name = (change.datasource, change.schema, change.table)
        if name not in tables:
            tables[name] = TableWrites(*name, change.keys, change.push_weight, change.seq)
            states[name] = {}
        if not change.keys:  # a keyless table: nothing to merge by, source order
            tables[name].changes.append(change)
        elif name in ordered:
            tables[name].steps.extend(_steps(change))
        else:
            _apply(states[name], change)
    for name, writes in tables.items():
        if name in ordered or not writes.keys:
            continue
        finals = sorted(states[name].items(), key=lambda item: item[1].seq)
        writes.deletes = [key for key, state in finals if state.row is _DELETED and not state.born]
        writes.upserts = [state.row for _, state in finals if state.row is not _DELETED]
    return sorted((w for w in tables.values() if w.rows),
                  key=lambda w: (w.push_weight, w.first_seq))


def _apply(state: dict[tuple[Any, ...], _KeyState], change: TargetChange) -> None:
    def put(key: tuple[Any, ...], row: Row | None, born_if_new: bool) -> None:
        previous = state.get(key)
        # only a key's first change says whether it existed before the batch: D + I stays
        # "existed" (an upsert), I + D + I + D stays "born" (nothing to delete)
        born = previous.born if previous else born_if_new
        if row is not None and previous is not None and previous.row is not None:
            row = {**previous.row, **row}  # I + U → I with merged columns (a partial row
            # of a wide-row part keeps the columns other parts wrote in this batch)
        state[key] = _KeyState(change.seq, row, born)

    if change.type is ChangeType.INSERT:
        assert change.after is not None
        put(tuple(change.after[k] for k in change.keys), change.after, True)
    elif change.type is ChangeType.UPDATE:
        assert change.after is not None and change.before_key is not None
        new_key = tuple(change.after[k] for k in change.keys)
        if new_key != change.before_key:
            put(change.before_key, _DELETED, False)
            put(new_key, change.after, True)
        else:
            put(new_key, change.after, False)
    elif change.type is ChangeType.DELETE:
        assert change.before_key is not None
        put(change.before_key, _DELETED, False)


def _steps(change: TargetChange) -> Iterator[tuple[bool, Any]]:
    """One change as ordered steps: (False, key) deletes, (True, row) upserts."""
    if change.type is ChangeType.DELETE:
        yield False, change.before_key
        return
    assert change.after is not None
    new_key = tuple(change.after[k] for k in change.keys)
    if change.type is ChangeType.UPDATE and change.before_key != new_key:
        yield False, change.before_key
    yield True, change.after
