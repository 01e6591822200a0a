"""The SQL Load writes for one target table's share of a batch.

- A keyed table's merged writes: multi-row ``DELETE … WHERE (key) IN (…)`` and
  ``INSERT … ON DUPLICATE KEY UPDATE``, or the steps of an ordered table (see
  :mod:`node.merge`), where a key change is an ``UPDATE … WHERE (key) = (old)`` so that the
  target's ``ON UPDATE CASCADE`` fires, then the row's upsert (a no-op where the UPDATE
  moved it; the row itself where the old key was not there yet). A ``column_groups`` update
  (:class:`~node.merge.PartialRow`) inserts every column of the source row and updates only
  its changed ones: a row the target lacks is made whole, one it has keeps the others.
- A **keyless** table (no primary key, no unique key over NOT NULL columns): every change in
  source order, an update or a delete touching the one row its whole before image
  matches (:mod:`node.target.mysql.keyless`).

Generated columns of the target table are never written and never matched on. A value over
``BIG_VALUE`` (a 16 MB BLOB, say), or a row whose values' text would not fit under the
target's ``max_allowed_packet`` (five 4 MB BLOBs: 40 MB as hex), would make a statement
larger than the target takes: a keyed row with one is written without those values (the big
ones, then its largest until the rest fits), then each is appended a piece at a time
(``CONCAT``), all in the batch's transaction. A keyless row cannot be (no key to find it
by): one that would not fit stops the pipeline before anything is sent
(:class:`~shared.errors.RowTooLargeError`); so does a keyed row whose key and values no
piece can hold (BINARY(n), JSON, ENUM, SET, geometry, a column a CHECK constraint names)
would not fit alone.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from node.changes import Row
from node.merge import CLEAR_, DELETE, MOVE, UPSERT, PartialRow, TableWrites
from node.target.mysql import cascades, keyless, pieces
from node.target.mysql.keys import key_padding, key_place, same_key, sql_value
from node.target.mysql.pieces import Stamps
from node.target.mysql.statement import Statement, chunks, like, runs, without
from shared.identifiers import qualified, quote


@dataclass(frozen=True)
class Column:
    """What rendering needs of one target column."""

    data_type: str  # as information_schema.COLUMNS.DATA_TYPE says: varchar, enum, point, …
    charset: str | None  # None for a column without one (numbers, dates, binary, geometry)
    generated: bool = False
    column_type: str = ""  # information_schema.COLUMNS.COLUMN_TYPE: int(10) unsigned, …
    collation: str | None = None  # None for a column without one
    nullable: bool = True  # it admits NULL
    # ON UPDATE CURRENT_TIMESTAMP: the target stamps it when a statement changes the row
    # without assigning it (kept with ``c = c`` where the row's value is the source's)
    stamped: bool = False
    # named in a CHECK constraint of its table (:mod:`node.target.mysql.checks`): a partial
    # value may be refused, so its values are never written a piece at a time
    checked: bool = False
    json: bool = False  # its values are JSON documents (MariaDB's JSON: a checked LONGTEXT)
    # in a unique index (a prefix one too): a partial value, the empty start above all, may
    # meet another row's and update that row instead, so its values go whole
    unique: bool = False


Columns = dict[str, Column]  # a target table's columns by name; empty when unknown


def statements(writes: TableWrites, size: int, columns: Columns | None = None,
               big: bool = True, parted: bool = False, packet: int = 0,
               children: tuple[cascades.Child, ...] = ()) -> Iterator[Statement]:
    """The statements of one table's writes: merged deletes then upserts, the ordered steps
    with consecutive ones of a kind together, or a keyless table's changes in source order.
    ``big`` False: the caller knows no value is over ``BIG_VALUE`` (rows read from events
    smaller than that), so rows are not looked at one by one for it. Multi-row INSERTs
    carry their values as the rows hold them (see :func:`~node.target.mysql.keys.sql_value`).
    ``parted``: the table holds wide rows, written a part at a time. ``packet``: the
    target's max_allowed_packet (0: not known): a keyed row whose values would not fit one
    statement under it writes its largest values a piece at a time; a keyless row that would
    not fit stops the pipeline (:class:`~shared.errors.RowTooLargeError`), nothing written.
    ``children``: the foreign keys to the table whose actions follow its ordered deletes
    and key changes (:mod:`node.target.mysql.cascades`; none for a run the source wrote
    with foreign_key_checks off)."""
    columns = columns or {}
    space = pieces.room(packet)
    generated = frozenset(name for name, column in columns.items() if column.generated)
    enums = frozenset(name for name, column in columns.items() if column.data_type == "enum")
    stamps = Stamps(tuple(name for name, column in columns.items() if column.stamped), parted)
    found = key_padding(writes.keys, columns)
    # columns whose values cannot be written a piece at a time: an empty start or a part is
    # no value of theirs (BINARY(n) pads it, JSON, ENUM, SET and geometry refuse it), or a
    # CHECK constraint of the table may refuse it (MariaDB's JSON: a checked LONGTEXT)
    fixed = tuple(name for name, column in columns.items()
                  if column.data_type not in pieces.PIECEABLE or column.checked or column.unique)
    target = (packet, columns)  # what a row that cannot be cut enough says (pieces.whole_values)
    yield from _deletes(writes, writes.deletes, size, found, columns)
    yield from _clears(writes, [(tuple(row[k] for k in writes.keys), row)
                                for row in writes.clears], size, generated, found, stamps)
    yield from _upserts(writes, without(writes.upserts, generated), size, enums, big, found,
                        stamps, space, fixed, target)
    for kind, group in itertools.groupby(writes.steps, key=lambda step: step[0]):
        items = [item for _, item in group]
        if kind == CLEAR_:
            yield from _clears(writes, items, size, generated, found, stamps)
        elif kind == UPSERT:
            yield from _upserts(writes, without(items, generated), size, enums, big, found,
                                stamps, space, fixed, target)
        elif kind == DELETE:
            for statement in _deletes(writes, items, size, found, columns):
                yield statement
                if children:
                    yield from _actions(cascades.deleted(writes.keys, statement.what,
                                                         children))
        else:
            assert kind == MOVE
            for old, row in items:  # the upsert continues the move's row: with
                yield _move(writes, found(old), row, generated, stamps, space if big else 0,
                            fixed, target)._replace(lenient=_empty_enums(row, enums))  # skip_load_
                # exception: both undone, or none
                for upsert in _upserts(writes, without([row], generated), size, enums, big,
                                       found, stamps, space, fixed, target):
                    yield upsert._replace(continues=True)
                if children:
                    yield from _actions(cascades.moved(
                        writes.keys, found(old), found(tuple(row[k] for k in writes.keys)),
                        children))
    yield from keyless.statements(writes, size, columns, generated, space if big else 0, packet)


def _actions(found: Iterator[tuple[str, list[Any]]]) -> Iterator[Statement]:
    """A parent's actions on its children (:mod:`node.target.mysql.cascades`), each going on
    with the parent's row (skipped with it in one-by-one mode); rows counted: none."""
    for sql, args in found:
        yield Statement(sql, args, False, [], continues=True)


def _move(writes: TableWrites, old_key: tuple[Any, ...], row: Row, generated: frozenset[str],
          stamps: Stamps = Stamps(), space: int = 0, fixed: tuple[str, ...] = (),
          target: tuple[int, Columns] = (0, {})) -> Statement:
    """A row's key change as the UPDATE the source ran, found by its old key (the target's
    ON UPDATE CASCADE fires as on the source). The row's upsert follows it: where the old
    key is not there — a copy has not reached the row yet, or a free-door request deleted it
    at its window's start — the row is written as any upsert writes it, and the pipeline
    goes on (it stopped for good there, every resume replaying the same batch). Values the
    upsert writes a piece at a time (``space``: see :func:`statements`) are left out here:
    the statement would not fit the target's max_allowed_packet (``target``: it and the
    table's columns; what is left that would not fit either stops the pipeline)."""
    values = {name: value for name, value in row.items() if name not in generated}
    if space:
        names, left = pieces.fitting(values, space, old_key, (*writes.keys, *fixed))
        pieces.whole_values(writes, values, names, left, space, *target)
        for name in names:
            del values[name]
    return _update(writes, old_key, values, False, stamps.kept(values, row))


def _clears(writes: TableWrites, items: list[tuple[tuple[Any, ...], Row]], size: int,
            generated: frozenset[str], found: Any, stamps: Stamps = Stamps()
            ) -> Iterator[Statement]:
    """Wide rows' parts cleared: their columns set to NULL where the rows are (no row:
    nothing), one UPDATE per chunk of rows that clear the same columns. They go before the
    table's upserts: a key the target's collation takes for a cleared one ('Bob' for 'bob',
    a part's key changed in case) gets its columns after the clear."""
    by_columns: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for key, row in items:
        columns = tuple(name for name in row if name not in writes.keys and
                        name not in generated)
        if columns and all(row[name] is None for name in columns):
            by_columns.setdefault(columns, []).append(found(key))
        elif columns:  # a clear merged with values of its own: one row
            yield _update(writes, found(key), {name: row[name] for name in columns}, False,
                          stamps.kept(columns, row))
    table = qualified(writes.schema, writes.table)
    one = "(" + ", ".join(["%s"] * len(writes.keys)) + ")"
    keys = ", ".join(map(quote, writes.keys))
    for columns, keys_of in by_columns.items():
        cleared = ", ".join([f"{quote(name)} = NULL" for name in columns] +
                            [f"{quote(name)} = {quote(name)}" for name in stamps.kept(columns)])
        for chunk in chunks(keys_of, size):
            yield Statement(f"UPDATE {table} SET {cleared} WHERE ({keys}) IN "
                            f"({', '.join([one] * len(chunk))})",
                            [sql_value(v) for key in chunk for v in key], False, chunk)


def _update(writes: TableWrites, key: tuple[Any, ...], values: Row, matches_one: bool,
            kept: tuple[str, ...] = ()) -> Statement:
    keys = ", ".join(map(quote, writes.keys))
    one = ", ".join(["%s"] * len(writes.keys))
    return Statement(f"UPDATE {qualified(writes.schema, writes.table)} SET "
                     + ", ".join([f"{quote(name)} = %s" for name in values] +
                                 [f"{quote(name)} = {quote(name)}" for name in kept])
                     + f" WHERE ({keys}) = ({one})",
                     [sql_value(v) for v in values.values()] + [sql_value(v) for v in key],
                     False, [key], matches_one)


def _deletes(writes: TableWrites, keys: list[tuple[Any, ...]], size: int,
             found: Any = same_key, columns: Columns | None = None) -> Iterator[Statement]:
    table = qualified(writes.schema, writes.table)
    one = key_place(writes.keys, columns or {})
    columns = ", ".join(map(quote, writes.keys))
    if found is not same_key:
        keys = [found(key) for key in keys]
    for chunk in chunks(keys, size):
        sql = f"DELETE FROM {table} WHERE ({columns}) IN ({', '.join([one] * len(chunk))})"
        yield Statement(sql, [sql_value(v) for key in chunk for v in key], False, chunk)


def _upserts(writes: TableWrites, rows: list[Row], size: int,
             enums: frozenset[str] = frozenset(), big: bool = True, found: Any = same_key,
             stamps: Stamps = Stamps(), space: int = 0, fixed: tuple[str, ...] = (),
             target: tuple[int, Columns] = (0, {})) -> Iterator[Statement]:
    """``big``: rows may hold values too large for one statement: those over BIG_VALUE, and
    the largest of a row whose values would not fit ``space`` bytes (:func:`pieces.room` of
    the target's max_allowed_packet), go a piece at a time; one whose rest would not fit
    still stops the pipeline (``target``: the packet and the table's columns, for what to
    say)."""
    table = qualified(writes.schema, writes.table)
    space = space or pieces.room(0)

    def taken(row: Row) -> list[str]:  # the values written a piece at a time
        if not big:
            return []
        rest = row.rest.values() if type(row) is PartialRow else ()  # type: ignore
        names, left = pieces.fitting(row, space, rest, (*writes.keys, *fixed))
        pieces.whole_values(writes, row, names, left, space, *target)
        return names

    if big or enums:
        together: list[Row] = []  # in source order: an ordered table's rows may share a key
        for row in rows:
            names = taken(row)
            if not names and not _empty_enums(row, enums):
                together.append(row)
                continue
            yield from _upserts(writes, together, size, big=False, found=found,
                                stamps=stamps)
            together = []
            alone = like(row, {name: value[:0] if name in names else value
                                for name, value in row.items()})
            for statement in _upserts(writes, [alone], 1, big=False, stamps=stamps):
                yield statement._replace(lenient=_empty_enums(row, enums))
            yield from _appends(writes, row, names, found, stamps, space)
        rows = together
    for columns, run in runs(rows):
        if type(run[0]) is PartialRow:  # a column-group update: see _upsert
            written, rest = columns
            sql = _upsert(table, written + rest, writes.keys, written,
                          stamps.kept(written, written + rest))
            for chunk in chunks(run, size):
                yield Statement(sql, [[*row.values(), *row.rest.values()]  # type: ignore
                                      for row in chunk], True, chunk)
            continue
        sql = _upsert(table, columns, writes.keys, None, stamps.kept(
            [c for c in columns if c not in writes.keys], columns))
        for chunk in chunks(run, size):
            yield Statement(sql, [[row[c] for c in columns] for row in chunk], True, chunk)


@functools.lru_cache(maxsize=256)
def _upsert(table: str, columns: tuple[str, ...], keys: tuple[str, ...],
            updated: tuple[str, ...] | None = None, kept: tuple[str, ...] = ()) -> str:
    """A table's multi-row upsert of ``columns`` (remembered: every batch writes the same
    few tables with the same columns). ``updated``: the columns a row the target has
    takes (a partial row's: the INSERT makes a missing row whole, and an existing one keeps
    its other columns). ``kept``: stamped columns it sets to themselves (:class:`Stamps`)."""
    if updated is None:
        update = [f"{quote(c)} = VALUES({quote(c)})"
                  for c in [c for c in columns if c not in keys] or [columns[0]]]
    else:
        update = [f"{quote(c)} = VALUES({quote(c)})" for c in updated if c not in keys] or \
            [f"{quote(keys[0])} = {quote(keys[0])}"]  # nothing changed: the row as it is
    update += [f"{quote(c)} = {quote(c)}" for c in kept]
    return (f"INSERT INTO {table} ({', '.join(map(quote, columns))}) VALUES "
            f"({', '.join(['%s'] * len(columns))}) ON DUPLICATE KEY UPDATE "
            + ", ".join(update))


def _empty_enums(row: Row, enums: frozenset[str]) -> tuple[str, ...]:
    if not enums:
        return ()
    rest = row.rest if type(row) is PartialRow else {}  # type: ignore[attr-defined]
    return tuple(name for name in enums if row.get(name) == "" or rest.get(name) == "")


def _appends(writes: TableWrites, row: Row, names: list[str], found: Any = same_key,
             stamps: Stamps = Stamps(), space: int = 0, fixed: tuple[str, ...] = ()
             ) -> Iterator[Statement]:
    """A row's big values (``names``), appended a piece a statement (whole characters for
    text): each continues the row's INSERT, which wrote them empty."""
    table = qualified(writes.schema, writes.table)
    key = found(tuple(row[k] for k in writes.keys))
    where = f"({', '.join(map(quote, writes.keys))}) = ({', '.join(['%s'] * len(key))})"
    for name, value in row.items():
        if name in names:
            held = [*row, *row.rest] if type(row) is PartialRow else row  # type: ignore
            same = "".join(f", {quote(c)} = {quote(c)}" for c in stamps.kept([name], held))
            sql = f"UPDATE {table} SET {quote(name)} = CONCAT({quote(name)}, %s){same} " \
                f"WHERE {where}"
            for piece in pieces.pieces(value, space):
                yield Statement(sql, [piece, *(sql_value(v) for v in key)], False, [key],
                                True, continues=True)
