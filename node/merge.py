"""Merge the target changes of one batch per target primary key (Otter's rules).

Each key ends the batch either deleted or holding one row, so the net effect is written
with one DELETE per deleted key and one upsert per surviving row:

- I + U → I (the last row wins), U + U → U, D + I → upsert;
- I + D → nothing (the key was born and died inside the batch);
- an update that changes the key deletes the old key and upserts the new one; a DELETE is
  written only for a key that existed before the batch, so the chain (1→2, 2→3), where 1
  existed, ends as "delete 1, upsert 3" (2 was born inside the batch).

A target that several source tables feed (N:1 without ``merge_part``, ``gathered``) is
merged so that one batch writes what the same changes cut into two batches would: its rows
are parts of one target row, so no key is ever new to it (another table's row may hold it)
and a key the batch deletes is deleted, then upserted with what the batch wrote after the
delete (D + I → delete and upsert; I + D → delete).

An update of a ``column_groups`` pair is a :class:`PartialRow`: the columns an existing row
takes, and the rest of the source row for a target that lacks the row (merged, a row that an
earlier change of the batch made or wrote keeps its columns: the rest is only for a row the
batch's first upsert makes).

Upserts keep the order of each key's last change, and a table's deletes run before its
upserts, so a unique value freed by a delete is free when a later insert takes it.

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
ordered tables interleave in source order, a new run whenever the table changes — or
whether foreign keys are checked: a source session's ``foreign_key_checks = 0`` (its rows
events say so), or rows a window read (the source's state, never to cascade); Load sets the
session's ``foreign_key_checks`` for each run — and consecutive deletes or upserts of one run
still go out as multi-row statements.

The order tables are written in (:func:`load_order`): ``push_weight`` (Otter's weight: the
load order of independent tables) orders the merged tables, lowest first, then by first
appearance. Runs never move by weight: they keep source order among themselves, whatever
the weights of the tables (or, for a target that several pairs feed, of the pairs) they
come from — a parent's delete moved ahead of its child's earlier update would fire an
``ON DELETE CASCADE`` the source never ran, and a target's delete moved ahead of its own
earlier insert would leave the row. A merged table shares no key and no foreign key with
any other table, so its place among the runs changes nothing it writes; it goes where its
weight and first appearance put it, as far as the runs' source order allows.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from node.changes import CLEAR, ChangeType, Row, TargetChange
from shared.errors import ConfigError

_DELETED = None
# how a target's changes are written, decided by its first change in the batch: merged by
# key, kept in source order (keyed), or in source order by their whole image (keyless)
_MERGED, _ORDERED, _KEYLESS = 0, 1, 2


class PartialRow(dict):  # type: ignore[type-arg]
    """A row an upsert writes only in part on a row the target has (a ``column_groups``
    update: its changed columns and their groups), with ``rest``, the other columns of the
    source row, which the INSERT writes when the target lacks the row (an update of a row
    a snapshot copy has not written yet, or from before ``start: latest``)."""

    rest: Row

    def __init__(self, row: Row, rest: Row) -> None:
        dict.__init__(self, row)
        self.rest = rest

    def __reduce__(self) -> tuple[Any, ...]:
        return PartialRow, (dict(self), self.rest)


def over(previous: Row, row: Row) -> Row:
    """``row`` written after ``previous`` on one key, as one upsert: a partial row's rest
    applies only where the first one makes the row."""
    merged = {**previous, **row}
    if type(previous) is PartialRow:
        rest = {name: value for name, value in previous.rest.items() if name not in merged}
        if rest:
            return PartialRow(merged, rest)
    return merged

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
    unchecked: bool = False  # a run whose changes go with foreign_key_checks off

    @property
    def ordered(self) -> bool:
        """A run of an ordered or keyless table: kept in source order, never moved by
        weight (see :func:`load_order`)."""
        return bool(self.steps or self.changes)

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
                                                                tuple[str, ...]], bool] = (),
          gathered: Collection[tuple[str, str, str]] = (),
          unchecked: Callable[[tuple[str, str, str], tuple[str, ...], int, bool], bool]
          | None = None) -> list[TableWrites]:
    """The batch's writes: one per merged table, and runs of the tables ``ordered`` names
    (datasource, schema, table; or a function of the table and its keys, asked once per
    table) and of keyless tables, which keep source order. ``gathered``: the tables several
    source tables feed (see the module's doc). ``unchecked``: whether an ordered change
    (its table, keys, seq, and whether it may cascade: a delete or a key change) goes with
    foreign_key_checks off — a run never holds changes of both kinds."""
    tables: dict[tuple[str, str, str], TableWrites] = {}
    states: dict[tuple[str, str, str], dict[tuple[Any, ...], list[Any]]] = {}
    runs: list[TableWrites] = []
    in_order: dict[tuple[str, str, str], int] = {}  # _MERGED, _ORDERED or _KEYLESS
    cleared: dict[tuple[str, str, str], set[tuple[Any, ...]]] = {}  # keys a clear left last
    shared: set[tuple[str, str, str]] = set()  # the gathered tables met
    asks = callable(ordered)
    for change in sorted(changes, key=_BY_SEQ):
        datasource, schema, table, kind, keys, before_key, after, weight, seq, ddl = \
            change[:10]
        name = (datasource, schema, table)
        kept = in_order.get(name)
        if kept is None:
            kept = in_order[name] = _KEYLESS if not keys else _ORDERED if (
                ordered(name, keys) if asks else name in ordered  # type: ignore[operator]
            ) else _MERGED
        elif (kept == _KEYLESS) != (not keys):
            raise ConfigError(_mixed(name, kept == _KEYLESS, change))
        if kept:
            off = unchecked is not None and unchecked(name, keys, seq,
                                                      _cascades(kind, keys, before_key, after))
            if not runs or (runs[-1].datasource, runs[-1].schema, runs[-1].table) != name \
                    or runs[-1].unchecked != off:
                runs.append(TableWrites(*name, keys, weight, seq, unchecked=off))
            if keys:
                runs[-1].steps.extend(_steps(change))
            else:
                runs[-1].changes.append(change)
            continue
        state = states.get(name)
        if state is None:
            tables[name] = TableWrites(*name, keys, weight, seq)
            state = states[name] = {}
            if gathered and name in gathered:
                shared.add(name)
        if ddl and ddl == CLEAR:
            _clear(state, cleared.setdefault(name, set()), _key(after, keys), after, seq)
            continue
        if cleared and name in cleared:  # a write after a clear: the row as it makes it
            if type(after) is PartialRow:
                _rested(state, cleared[name], _key(after, keys), after)
            cleared[name].difference_update((before_key, _key(after, keys) if after else None))
        if shared and name in shared:  # no key is new: a delete is always written
            _gathered(state, kind, keys, before_key, after, seq)
            continue
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
        writes.deletes = [key for key, state in finals if state[_ROW] is _DELETED and
                          not state[_BORN]] if name not in shared else \
            [key for key, state in finals if state[_BORN] is _GONE]
        keep = cleared.get(name)
        if not keep:
            writes.upserts = [state[_ROW] for _, state in finals if state[_ROW] is not _DELETED]
            continue
        for key, state in finals:  # a key a clear left last is updated where its row is
            if state[_ROW] is not _DELETED:
                (writes.clears if key in keep else writes.upserts).append(state[_ROW])
    return load_order([w for w in [*tables.values(), *runs] if w.rows])


def _mixed(name: tuple[str, str, str], keyless: bool, change: TargetChange) -> str:
    """The error for a target whose batch holds keyless and keyed changes: merged by key,
    its keyless rows would collapse into one, silently (the layout check refuses such
    tables first: :func:`node.extract.layouts.mixed_keys`; this is its safety net)."""
    said = f"changes without a key and, in the same batch, one keyed by " \
        f"({', '.join(change.keys)})" if keyless else \
        "keyed changes and, in the same batch, one without a key"
    return (f"target {name[0]}: table {name[1]}.{name[2]} takes {said} (seq "
            f"{change.seq}): several source tables feed it, some with a primary key and "
            "some without, and merged by one key a keyless table's rows would be taken for "
            "one another (all but the last lost). Give the source tables one key over the "
            "same columns, or send the keyless ones to a target of their own (setl apply), "
            "then resume the channel")


def _weight_first(item: Any) -> tuple[int, int]:
    return item.push_weight, item.first_seq


def load_order(items: Iterable[Any]) -> list[Any]:
    """Table writes (or units: anything with ``push_weight``, ``first_seq`` and ``ordered``)
    in the order they are loaded: runs (``ordered``) in source order, merged tables by
    ascending weight then first appearance, each merged table before the first run it
    sorts before by (weight, first appearance) — runs never move by weight."""
    runs: list[Any] = []
    merged: list[Any] = []
    for item in items:
        (runs if item.ordered else merged).append(item)
    merged.sort(key=_weight_first)
    if not runs:
        return merged
    runs.sort(key=operator.attrgetter("first_seq"))
    found: list[Any] = []
    taken = 0
    for run in runs:
        place = _weight_first(run)
        while taken < len(merged) and _weight_first(merged[taken]) <= place:
            found.append(merged[taken])
            taken += 1
        found.append(run)
    found.extend(merged[taken:])
    return found


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
        row = {**previous[_ROW], **row} if type(previous[_ROW]) is not PartialRow else \
            over(previous[_ROW], row)  # I + U → I with merged columns (a partial row of a
        # wide-row part keeps the columns other parts wrote in this batch)
    elif row is not None and type(row) is PartialRow:  # D + a column-group update (a
        row = {**row.rest, **row}  # free-door D, then the stream's update): the whole row,
        # as D + I writes it (the delete is not written)
    previous[_SEQ], previous[_ROW] = seq, row


_GONE = "gone"  # a gathered table's key the batch deleted (in place of _BORN)


def _gathered(state: dict[tuple[Any, ...], list[Any]], kind: ChangeType,
              keys: tuple[str, ...], before_key: tuple[Any, ...] | None, after: Row | None,
              seq: int) -> None:
    """A change of a gathered table: a delete is kept, and the upserts after it merged."""
    if kind is not INSERT and before_key is not None and (
            kind is DELETE_ or _key(after, keys) != before_key):
        found = state.get(before_key)
        if found is None:
            state[before_key] = [seq, _DELETED, _GONE]
        else:
            found[_SEQ], found[_ROW], found[_BORN] = seq, _DELETED, _GONE
    if after is not None:
        key = _key(after, keys)
        found = state.get(key)
        if found is None:
            state[key] = [seq, after, False]
        else:
            found[_SEQ] = seq
            found[_ROW] = after if found[_ROW] is _DELETED else over(found[_ROW], after)


def _clear(state: dict[tuple[Any, ...], list[Any]], cleared: set[tuple[Any, ...]],
           key: tuple[Any, ...], row: Row, seq: int) -> None:
    """A wide row's part cleared: nothing to a key deleted in the batch, its columns over a
    row the batch writes, else an update of the row where it is (``cleared``)."""
    previous = state.get(key)
    if previous is None:
        state[key] = [seq, row, False]
        cleared.add(key)
    elif previous[_ROW] is not _DELETED:
        previous[_SEQ], previous[_ROW] = seq, over(previous[_ROW], row)


def _rested(state: dict[tuple[Any, ...], list[Any]], keep: set[tuple[Any, ...]],
            key: tuple[Any, ...], row: PartialRow) -> None:
    """A column-group update of a key only a clear wrote in the batch: the cleared row takes
    the update's ``rest``, so that where the target lacks the row the upsert makes it whole,
    as the update alone would (the clear finds no row and writes nothing)."""
    found = state.get(key) if key in keep else None
    if found is not None and found[_ROW] is not _DELETED and type(found[_ROW]) is not PartialRow:
        found[_ROW] = PartialRow(found[_ROW], row.rest)


def _cascades(kind: ChangeType, keys: tuple[str, ...], before_key: tuple[Any, ...] | None,
              after: Row | None) -> bool:
    """Whether a change may fire a foreign key's ON DELETE or ON UPDATE action: a delete, a
    key change, any update of a keyless row."""
    return kind is DELETE_ or (kind is UPDATE and (
        not keys or after is None or before_key != _key(after, keys)))


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
