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

Some tables are not merged but written in source order (``ordered``), which the source has
proven valid:

- a table with a unique key besides its primary key: two rows can pass a unique value between
  them inside one batch (row 1 gives up code 16, row 3 takes it), and writing the net rows in
  any other order lets an upsert land on the wrong row;
- tables linked by foreign keys: a transaction may insert a parent and then its child, or
  delete a child and then its parent; and a cascade is not in the binlog (the source's engine
  did it), so only the target's own foreign keys redo it, and only if the statements that
  fire it come in source order — merging "insert P, insert C, delete P" into "insert C" would
  fail, or with checks off leave C behind. A key change is an UPDATE (``MOVE``), so an
  ``ON UPDATE CASCADE`` fires on the target as on the source;
- a keyless table (no key): nothing to merge by (see :mod:`node.target.mysql.render`).

Their changes are ``steps`` (or a keyless table's ``changes``) in runs: the changes of all
ordered tables interleave in source order, a new run whenever the table changes, and
consecutive deletes or upserts of one run still go out as multi-row statements.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from node.changes import CLEAR, ChangeType, Row, TargetChange

_DELETED = None
UPSERT, DELETE, MOVE, CLEAR_ = "upsert", "delete", "move", "clear"  # step kinds: row, key,
# (old key, row), (key, row: a wide row's part cleared where the row is)


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
    steps: list[tuple[str, Any]] = field(default_factory=list)  # (step kind, its item)
    changes: list[TargetChange] = field(default_factory=list)  # a keyless table's, in order
    clears: list[Row] = field(default_factory=list)  # parts cleared where their row is

    @property
    def rows(self) -> int:
        return len(self.deletes) + len(self.upserts) + len(self.steps) + len(self.changes) + \
            len(self.clears)


# a key's state in the batch: [seq of its last change, its row (None: deleted), whether the
# key's first change in the batch created it]
_SEQ, _ROW, _BORN = 0, 1, 2
_BY_SEQ = operator.attrgetter("seq")
INSERT, UPDATE, DELETE_ = ChangeType.INSERT, ChangeType.UPDATE, ChangeType.DELETE


def merge(changes: Iterable[TargetChange],
          ordered: Collection[tuple[str, str, str]] | Callable[[tuple[str, str, str],
                                                                tuple[str, ...]], bool] = ()
          ) -> list[TableWrites]:
    """The batch's writes: one per merged table, and runs of the tables ``ordered`` names
    (datasource, schema, table; or a function of the table and its keys, asked once per
    table) and of keyless tables, which keep source order."""
    tables: dict[tuple[str, str, str], TableWrites] = {}
    states: dict[tuple[str, str, str], dict[tuple[Any, ...], list[Any]]] = {}
    runs: list[TableWrites] = []
    in_order: dict[tuple[str, str, str], bool] = {}
    cleared: dict[tuple[str, str, str], set[tuple[Any, ...]]] = {}  # keys a clear left last
    asks = callable(ordered)
    for change in sorted(changes, key=_BY_SEQ):
        datasource, schema, table, kind, keys, before_key, after, weight, seq, ddl = \
            change[:10]
        name = (datasource, schema, table)
        kept = in_order.get(name)
        if kept is None:
            kept = in_order[name] = not keys or (
                ordered(name, keys) if asks else name in ordered)  # type: ignore[operator]
        if kept:
            if not runs or (runs[-1].datasource, runs[-1].schema, runs[-1].table) != name:
                runs.append(TableWrites(*name, keys, weight, seq))
            if keys:
                runs[-1].steps.extend(_steps(change))
            else:
                runs[-1].changes.append(change)
            continue
        state = states.get(name)
        if state is None:
            tables[name] = TableWrites(*name, keys, weight, seq)
            state = states[name] = {}
        if ddl and ddl == CLEAR:
            _clear(state, cleared.setdefault(name, set()), _key(after, keys), after, seq)
            continue
        if cleared and name in cleared:  # a write after a clear: the row as it makes it
            cleared[name].difference_update((before_key, _key(after, keys) if after else None))
        if kind is INSERT:
            key = (after[keys[0]],) if len(keys) == 1 else _key(after, keys)
            if key not in state:  # the commonest: a new key
                state[key] = [seq, after, True]
            else:
                _put(state, key, after, True, seq)
        elif kind is UPDATE:
            new_key = _key(after, keys)
            if new_key != before_key:
                _put(state, before_key, _DELETED, False, seq)
                _put(state, new_key, after, True, seq)
            else:
                _put(state, new_key, after, False, seq)
        elif kind is DELETE_:
            assert before_key is not None
            _put(state, before_key, _DELETED, False, seq)
    for name, writes in tables.items():
        finals = sorted(states[name].items(), key=lambda item: item[1][_SEQ])
        writes.deletes = [key for key, state in finals
                          if state[_ROW] is _DELETED and not state[_BORN]]
        keep = cleared.get(name)
        if not keep:
            writes.upserts = [state[_ROW] for _, state in finals if state[_ROW] is not _DELETED]
            continue
        for key, state in finals:  # a key a clear left last is updated where its row is
            if state[_ROW] is not _DELETED:
                (writes.clears if key in keep else writes.upserts).append(state[_ROW])
    return sorted((w for w in [*tables.values(), *runs] if w.rows),
                  key=lambda w: (w.push_weight, w.first_seq))


def _key(row: Row | None, keys: tuple[str, ...]) -> tuple[Any, ...]:
    assert row is not None
    return (row[keys[0]],) if len(keys) == 1 else tuple([row[k] for k in keys])


def _put(state: dict[tuple[Any, ...], list[Any]], key: tuple[Any, ...], row: Row | None,
         born_if_new: bool, seq: int) -> None:
    previous = state.get(key)
    if previous is None:
        state[key] = [seq, row, born_if_new]
        return
    # only a key's first change says whether it existed before the batch: D + I stays
    # "existed" (an upsert), I + D + I + D stays "born" (nothing to delete)
    if row is not None and previous[_ROW] is not None:
        row = {**previous[_ROW], **row}  # I + U → I with merged columns (a partial row
        # of a wide-row part keeps the columns other parts wrote in this batch)
    previous[_SEQ], previous[_ROW] = seq, row


def _clear(state: dict[tuple[Any, ...], list[Any]], cleared: set[tuple[Any, ...]],
           key: tuple[Any, ...], row: Row, seq: int) -> None:
    """A wide row's part cleared: nothing to a key deleted in the batch, its columns over a
    row the batch writes, else an update of the row where it is (``cleared``)."""
    previous = state.get(key)
    if previous is None:
        state[key] = [seq, row, False]
        cleared.add(key)
    elif previous[_ROW] is not _DELETED:
        previous[_SEQ], previous[_ROW] = seq, {**previous[_ROW], **row}


def _steps(change: TargetChange) -> Iterator[tuple[str, Any]]:
    """One change as an ordered step: a delete, an upsert, the move of a row to a new key,
    or a part cleared."""
    if change.ddl == CLEAR:
        assert change.after is not None
        yield CLEAR_, (tuple(change.after[k] for k in change.keys), change.after)
        return
    if change.type is ChangeType.DELETE:
        yield DELETE, change.before_key
        return
    assert change.after is not None
    new_key = tuple(change.after[k] for k in change.keys)
    if change.type is ChangeType.UPDATE and change.before_key != new_key:
        yield MOVE, (change.before_key, change.after)
        return
    yield UPSERT, change.after
