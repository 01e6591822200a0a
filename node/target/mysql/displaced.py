"""Rows a window read, written onto a target out of step with another unique key: no row
lands on another key's row.

A row a snapshot chunk or a free-door request read goes as an upsert, ``INSERT … ON
DUPLICATE KEY UPDATE`` without its key columns. On a target in step that upsert meets at
most the row of its own key (the source's unique values are unique). A target out of step —
what snapshots and backfills are run to fix — may hold one of the row's values of another
unique key under *another* key: source (1, slot 5), (2, slot 6); target only (2, slot 5).
The upsert of row 1 would meet row 2 on ``slot`` and update row 2's other columns: row 1
lost, row 2 holding row 1's values under its own key, an image the source never had.

So before the upserts of such rows (only into a target table with a unique key besides
the key the rows are found by), the same transaction removes the target rows that hold
one of their unique values under another key (:func:`selects` renders the look-up, one
per unique key and statement chunk, ``SELECT … FOR UPDATE``; Load runs it with
:func:`write`, then, where it found rows, the ``DELETE`` of the same condition, which
deletes the rows it locked):

- a chunk read of a whole table (a snapshot): a row so displaced is one the source does not
  have, or one whose own chunk is not copied yet (a chunk copied is in step, and the source
  is unique) — it is copied with its chunk (Load does not tell a chunk's rows from a
  request's: it asks for such a row again too, as below — a second copy that changes
  nothing, or a request noted missing);
- a free-door key read (a backfill, repair's I/U): the row displaced may be outside the
  request. Load hands its key to the pipeline's free door (``Loader.displaced``), which
  keeps an ``I`` request for it in the source's ``retl_pending`` before the target commits
  (a request served twice is harmless): it is copied again in a later window. A key the
  same statement chunk writes anyway is not asked again. The door is handed the keys before
  the ``DELETE`` (with the key of the row read that met each, and the index): where another
  pipeline writes the table, or a key comes back displaced by another batch, it stops the
  batch instead (:mod:`node.snapshot.displacing`), nothing deleted.

The stream's upserts (an insert, an update that keeps its key) into a table whose copy is
unfinished — a snapshot copying or asked for, free-door requests waiting
(:meth:`node.snapshot.controller.Snapshots.copying`, ``JobSpec.copying``) — go the same way:
a target out of step there is what the copy mends, and the stream's row meeting another
key's row on a unique key failed with 1062 (or updated that row) at every try, the copy that
would mend it behind it in the same pipeline: a stall that never healed. The row met is
removed and asked again as above; on a target in step a look-up finds only rows its own
statement chunk writes (a swap of unique values in source order), which the chunk writes
again. Each statement chunk's look-up goes right before it, so it meets the target as the
steps before it left it. Elsewhere the stream's SQL is unchanged, and a 1062 pauses
(:mod:`node.target.mysql.duplicate`: the pause says what to do). A ``DELETE`` in a run
with foreign_key_checks on (the stream's, into a table with foreign keys) goes with them
off: a row removed to be copied again fires no ``ON DELETE`` action.

A unique key over a column's prefix (``UNIQUE (name(3))``) is compared as the index does:
``LEFT`` of the column and of the values, in the column's collation. One over a column the
rows do not carry (the target generates it, or the pair does not map it) cannot be looked
up: after each statement chunk of such rows, :func:`check` asks that every row's key holds
a row (an upsert that met another key's row there updated it and left its own key empty),
and the batch stops with :class:`DisplacedError` where one does not.

The look-up runs only where a batch holds rows read in a window for such a table, or the
stream's rows into such a table being copied; it finds nothing outside their own chunk on
a target in step.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import pymysql

from node.changes import Row
from node.jobs import Unit
from node.merge import UPSERT, TableWrites
from node.target.mysql.facts import TableFacts, Target
from node.target.mysql.keys import key_padding, key_place, sql_value
from node.target.mysql.lookedup import Index, others, unseen
from node.target.mysql.pieces import room
from node.target.mysql.sqltext import Sql, literal
from shared.datatypes import read_expression
from shared.errors import DisplacedError
from shared.identifiers import qualified, quote, template

log = logging.getLogger("setl.node.target.mysql.displaced")

MARK = "SELECT /* setl:displaced */ "  # a look-up's text begins so (Load runs it itself)


class Moved(NamedTuple):
    """A target row a look-up found: its key, the key of the first row of the chunk that
    meets it (None where none does: not met by the server's comparison), the unique index
    they meet on."""

    key: tuple[Any, ...]
    by: tuple[Any, ...] | None
    index: str


class Lookup(NamedTuple):
    """What a look-up carries besides its text: the ``DELETE`` of its rows, the unique index
    it looks on (as the message names it), the chunk's rows' keys in their order, and whether
    the ``DELETE`` goes with foreign_key_checks off where the run has them on (a table with
    foreign keys: a row removed to be copied again fires no ``ON DELETE`` action, as a row
    read never cascades)."""

    delete: str
    index: str
    keys: list[tuple[Any, ...]]
    unchecked: bool = False
    # the stream's rows of the chunk: the text of each distinct key in a row constructor,
    # by the place of its first row among the chunk's rows (:func:`_spared`)
    streamed: dict[int, str] | None = None
    key_list: str = ""  # the key's columns, quoted
    # where no stream row is in the chunk: each unique value's key (the row read that meets
    # a row found, matched as the values come back, for the message only)
    by_values: dict[tuple[Any, ...], tuple[Any, ...]] | None = None


# (target, key columns, rows displaced outside their statement chunk, the batch's processId):
# the free door's hook; it may raise DisplacedError (then nothing is deleted)
Displaced = Callable[[Target, tuple[str, ...], list[Moved], int], None]


def sqls(writes: TableWrites, read: dict[int, bool], table: TableFacts, size: int,
         rendered: Callable[[TableWrites], list[Sql]]) -> list[Sql] | None:
    """An ordered table's statements (``rendered`` renders a part of its steps) with the
    look-ups of :func:`selects` before each statement chunk of a run of rows read, and
    where the look-up cannot compare a unique key (:func:`unseen`) the :func:`check` after
    it; None: it holds none."""
    if not writes.steps or not any(kind == UPSERT and id(item) in read
                                   for kind, item in writes.steps):
        return None
    out: list[Sql] = []
    part: list[tuple[str, Any]] = []
    reading, first = False, [True]

    def render(steps: list[tuple[str, Any]]) -> list[Sql]:
        done = rendered(dataclasses.replace(writes, steps=steps) if first[0] else
                        dataclasses.replace(writes, steps=steps, deletes=[], upserts=[],
                                            clears=[], changes=[]))
        first[0] = False
        return done

    for step in [*writes.steps, ("", None)]:
        now = step[0] == UPSERT and id(step[1]) in read
        if part and (now != reading or not step[0]):
            if not reading:
                out += render(part)
            else:  # each statement chunk's look-up just before it: it meets the target
                # as the steps before it left it (the stream's rows swap unique values
                # between them in source order; a look-up ahead of an earlier chunk would
                # take a row that chunk frees for one displaced)
                indexes = unseen(table, writes.keys, part[0][1])
                for at in range(0, len(part), size):
                    out += _fitted(writes, part[at:at + size], read, table, indexes, render)
            part = []
        reading = now
        part.append(step)
    return out


def _fitted(writes: TableWrites, chunk: list[tuple[str, Any]], read: dict[int, bool],
            table: TableFacts, indexes: list[Index],
            render: Callable[[list[tuple[str, Any]]], list[Sql]]) -> list[Sql]:
    """A statement chunk of rows read with its look-ups before it (and its check after),
    halved while a look-up would not fit the target's packet (a chunk's long unique values,
    or a prefix index's whole values: refused at every try, the pipeline stalled — a
    review); a smaller chunk is as exact."""
    rows = [item for _, item in chunk]
    looks = selects(writes, rows, table, [item for item in rows if not read[id(item)]])
    if len(chunk) > 1 and any(len(sql.text.encode()) > room(table.packet) for sql in looks):
        half = len(chunk) // 2
        return _fitted(writes, chunk[:half], read, table, indexes, render) + \
            _fitted(writes, chunk[half:], read, table, indexes, render)
    return looks + render(chunk) + (check(writes, rows, table, indexes) if indexes else [])


def selects(writes: TableWrites, rows: list[Row], table: TableFacts,
            streamed: Sequence[Row] = ()) -> list[Sql]:
    """The look-ups of the target rows that hold a unique value of ``rows`` under another
    key (rows with a NULL in a unique key meet no row there): their keys, and whether the
    rows themselves hold that key (written by the same statements: not asked again). A
    prefix of a column (``UNIQUE (name(3))``) is compared as the index does: its first
    characters (bytes of a binary type), ``LEFT`` of both sides, in the column's
    collation.

    The delete takes the rows found but those :func:`_spared`: a row whose key a row of the
    stream among ``rows`` (``streamed``) writes before any row takes the value it holds (on
    a target in step the stream's rows swap unique values between them in source order, and
    the chunk's upserts move such a row aside as the source did; deleted and written again,
    a target-only column was reset, an ``ON UPDATE CASCADE`` lost, a DELETE trigger fired: a
    review). A row the chunk writes only after another row takes its value is out of step
    (in source order it gave the value up first): deleted, or that row's upsert would update
    it. A row a window read is written over whatever its key holds: deleted too."""
    keys, columns = writes.keys, table.columns
    name = qualified(writes.schema, writes.table)
    pad = key_padding(keys, columns)
    key_list = ", ".join(map(quote, keys))
    own = [pad(tuple(row[k] for k in keys)) for row in rows]
    inside = _tuples(keys, own, columns)
    places = {id(row): at for at, row in enumerate(rows)}
    mine: dict[int, str] = {}  # (Python's equality only to skip repeats of a key's text)
    seen: set[tuple[Any, ...]] = set()
    for row in streamed:
        key = pad(tuple(row[k] for k in keys))
        if key not in seen:
            seen.add(key)
            mine[places[id(row)]] = _tuples(keys, [key], columns)
    # where the stream's rows are in the chunk: the place of the first of them writing the
    # key each row found holds, as the key compares (a big5 text, a FLOAT, a BIT the server
    # returns otherwise than the binlog gave it never matched in Python: such rows were
    # deleted and written again, an ON UPDATE CASCADE lost — a review)
    first = "" if not mine else ", CASE " + " ".join(
        f"WHEN ({key_list}) = {text} THEN {at}" for at, text in mine.items()) + " END"
    # the keys found as the node reads keys (a FLOAT's exact double, a BIT's number, text of
    # a charset Python does not read exactly as its bytes): the free door asks for them so
    # (as printed, a FLOAT's 0.2 found no row of the source: asked again, the row displaced
    # came back missing and stayed deleted — a review)
    read = ", ".join(_read(key, columns) for key in keys)
    out = []
    for index in others(table, keys):
        spelt = _spelt(rows[0], tuple(column for column, _ in index))
        if spelt is None:  # a unique column the rows do not carry (see check)
            continue
        prefixes = tuple(prefix for _, prefix in index)
        upad = key_padding(spelt, columns)
        placed = [(pad_u, key, at) for at, (row, key) in enumerate(zip(rows, own, strict=True))
                  if None not in (pad_u := upad(tuple(row.get(c) for c in spelt)))]
        pairs = [(u, k) for u, k, _ in placed]
        if not pairs:
            continue
        values = _tuples(spelt, list(dict.fromkeys(u for u, _ in pairs)), columns, prefixes)
        both = _tuples((*spelt, *keys), [(*u, *k) for u, k in pairs], columns,
                       (*prefixes, *(0 for _ in keys)))
        held = [_cut(quote(c), n) for c, n in zip(spelt, prefixes, strict=True)]
        where = (f"FROM {name} WHERE ({', '.join(held)}) IN ({values}) AND "
                 f"({', '.join([*held, *map(quote, keys)])}) NOT IN ({both})")
        named = "(" + ", ".join(_cut(quote(c), n) for c, n in index) + ")"
        # the place of the first row taking the value each row found holds, as the index
        # compares (its collation, its prefix); the delete by the same condition: the rows
        # the look-up found and locked
        # (where the stream's rows are in the chunk: a chunk only read takes its held
        # values back, the text no larger than the values twice)
        taken = ", ".join(held) if not mine else "CASE " + " ".join(
            f"WHEN ({', '.join(held)}) = "
            f"{_tuples(spelt, [u], columns, prefixes)} THEN {at}" for u, _, at in placed) + \
            " END"
        out.append(Sql(f"{MARK}{read}, ({key_list}) IN ({inside}), {taken}{first} "
                       f"{where} FOR UPDATE", 0,
                       what=Lookup(f"DELETE {where}", named, own,
                                   table.foreign_keys and not writes.unchecked, mine or None,
                                   key_list, None if mine else dict(pairs[::-1]))))
    return out


class Net(NamedTuple):
    """What a :func:`check` looks for: the keys of a statement chunk's rows, and the unique
    keys the look-up could not compare (for the message)."""

    keys: list[tuple[Any, ...]]
    indexes: str


def check(writes: TableWrites, rows: list[Row], table: TableFacts, indexes: list[Index]
          ) -> list[Sql]:
    """After a statement chunk of rows read, into a table with a unique key the look-up
    cannot compare (:func:`unseen`): every row's key holds a row. An upsert whose key is
    not on the target yet, meeting another key's row on such a unique key, updates that
    row and leaves its own key absent; one whose key is there meets its own row first (the
    primary key is the first the server looks in), then fails on the other. One statement
    a chunk (:func:`write` raises :class:`DisplacedError`); in one-by-one mode it goes with
    its row (``continues``: not run for a row the target refused and Load skipped) and must
    find exactly one row."""
    keys, columns = writes.keys, table.columns
    pad = key_padding(keys, columns)
    own = list(dict.fromkeys(key for row in rows
                             if None not in (key := pad(tuple(row[k] for k in keys)))))
    if not own:
        return []
    key_list = ", ".join(map(quote, keys))
    named = ", ".join("(" + ", ".join(_cut(quote(c), n) for c, n in index) + ")"
                      for index in indexes)
    return [Sql(f"{MARK}{key_list} FROM {qualified(writes.schema, writes.table)} WHERE "
                f"({key_list}) IN ({_tuples(keys, own, columns)}) FOR UPDATE", 0,
                matches_one=len(own) == 1, what=Net(own, named), continues=True)]


def _read(name: str, columns: Any) -> str:
    """A key column selected as the node reads it (:func:`shared.datatypes.read_expression`)."""
    column = next((one for known, one in columns.items() if known.lower() == name.lower()),
                  None)
    return read_expression(name, column.data_type, column.charset) if column else quote(name)


def _cut(place: str, prefix: int) -> str:
    """A value or column as a unique index of a prefix compares it."""
    return f"LEFT({place}, {int(prefix)})" if prefix else place


def _spelt(row: Row, index: tuple[str, ...]) -> tuple[str, ...] | None:
    """An index's columns as the rows name them (names ignore case); None: one missing."""
    by_lower = {name.lower(): name for name in row}
    found = tuple(by_lower.get(column.lower()) for column in index)
    return None if None in found else found  # type: ignore[return-value]


def _tuples(names: tuple[str, ...], values: list[tuple[Any, ...]], columns: Any,
            prefixes: tuple[int, ...] = ()) -> str:
    place = key_place(names, columns)
    if any(prefixes):  # each place cut as its index does ("(%s)" or "(a, b, …)")
        inner = place[1:-1].split(", ") if len(names) > 1 else ["%s"]
        place = "(" + ", ".join(_cut(one, n) for one, n in zip(inner, prefixes,
                                                                strict=True)) + ")"
    place = template(place)
    return ", ".join(place % tuple(literal(sql_value(v)) for v in one) for one in values)


def marked(sql: Sql) -> bool:
    return sql.text.startswith(MARK)


def write(cursor: Any, unit: Unit, sql: Sql, pipeline_id: str, process_id: int,
          hook: Displaced | None) -> int:
    """A look-up run: the rows found handed, where outside their chunk, to ``hook`` (the
    free door: it asks for them again, or raises :class:`DisplacedError` where deleting them
    could lose a row or never end), then deleted by key and logged, before the transaction
    commits; the rows deleted."""
    keys = unit.keys
    if isinstance(sql.what, Net):
        return _checked(cursor, unit, sql, pipeline_id, process_id)
    lookup: Lookup = sql.what
    try:
        cursor.execute(sql.text)  # (no arguments: its text is sent as it is)
        found = cursor.fetchall()
        if not found:
            return 0
        displaced = [tuple(row[:len(keys)]) for row in found]
        outside = [Moved(key, _by(lookup, row[len(keys) + 1:]), lookup.index)
                   for key, row in zip(displaced, found, strict=True) if not row[len(keys)]]
        if outside and hook is not None:  # (before the delete: it may stop the batch)
            hook((unit.datasource, unit.schema, unit.table), keys, outside, process_id)
        if lookup.unchecked:  # (the run's checks on again after it)
            cursor.execute("SET SESSION foreign_key_checks = 0")
        deleted = cursor.execute(lookup.delete + _spared(lookup, found, len(keys)))
        if lookup.unchecked:
            cursor.execute("SET SESSION foreign_key_checks = 1")
    except pymysql.MySQLError as exc:  # same class and code: Load retries go by them
        if len(exc.args) != 2:
            raise
        raise type(exc)(exc.args[0], f"table {unit.schema}.{unit.table}: removing the rows "
                        "that hold a unique value of rows read in a window under another "
                        f"key: {exc.args[1]}") from None
    if not deleted:  # (only rows the stream's own upserts move aside: in step)
        return 0
    log.warning("event=displaced_rows pipeline=%s process_id=%d target=%s table=%s count=%d "
                "asked_again=%d keys=%s", pipeline_id, process_id, unit.datasource,
                f"{unit.schema}.{unit.table}", deleted, len(outside),
                [list(key) for key in displaced[:20]])
    if outside and hook is None:
        log.warning("event=displaced_rows_not_asked pipeline=%s target=%s table=%s "
                    "count=%d: no free door to copy them again; run setl verify --repair",
                    pipeline_id, unit.datasource, f"{unit.schema}.{unit.table}", len(outside))
    return deleted


def _spared(lookup: Lookup, found: Any, width: int) -> str:
    """What the look-up's ``DELETE`` leaves (its condition's tail): the rows found whose key
    a row of the stream in the chunk writes before the first row taking the value it holds
    — the chunk moves them aside as the source did (a target in step). Both places are the
    server's answers (the look-up's last two columns: the index's collation and prefix, the
    key as it compares; Python's comparison missed accents and case, and a big5 text, a FLOAT
    or a BIT key as the server returns it: reviews), and the key spared is rendered as the
    stream's row renders it; a row no stream row of the chunk writes is deleted (deleted and
    written again, never updated with another key's values)."""
    spared = []
    for row in found:
        if not row[width] or not lookup.streamed or row[-1] is None:
            continue
        mine, taken = int(row[-1]), row[-2]  # (see selects: the last two columns)
        if taken is not None and mine < int(taken):
            spared.append(lookup.streamed[mine])
    return f" AND ({lookup.key_list}) NOT IN ({', '.join(spared)})" if spared else ""


def _by(lookup: Lookup, rest: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The key of the first row of the chunk whose unique values a displaced row holds (for
    the message only): the server's answer where the stream's rows are in the chunk (the
    index's collation and prefix), else the row read holding the values as they came back
    (None where the collation or a prefix took them otherwise)."""
    if lookup.by_values is not None:
        return lookup.by_values.get(tuple(rest))
    taken = rest[0]
    return None if taken is None else lookup.keys[int(taken)]


def _checked(cursor: Any, unit: Unit, sql: Sql, pipeline_id: str, process_id: int) -> int:
    """A :func:`check` run: every key of its chunk holds a row, or :class:`DisplacedError`."""
    net: Net = sql.what
    try:
        cursor.execute(sql.text)
        found = cursor.fetchall()
    except pymysql.MySQLError as exc:  # (as a look-up's: Load retries go by class and code)
        if len(exc.args) != 2:
            raise
        raise type(exc)(exc.args[0], f"table {unit.schema}.{unit.table}: checking that the "
                        f"rows read in a window hold their own keys: {exc.args[1]}") from None
    if len(found) == len(net.keys):
        return 0
    held = {tuple(row) for row in found}
    missing = [key for key in net.keys if key not in held] or net.keys
    table = f"{unit.schema}.{unit.table}"
    log.error("event=displaced_rows_unchecked pipeline=%s process_id=%d target=%s table=%s "
              "unique=%s count=%d keys=%s", pipeline_id, process_id, unit.datasource, table,
              net.indexes, len(net.keys) - len(found), [list(key) for key in missing[:20]])
    raise DisplacedError(
        f"target {unit.datasource}, table {table}: {len(net.keys) - len(found)} row(s) read "
        f"in a window (keys {[list(key) for key in missing[:20]]}) are not at their own keys "
        f"after their upserts: each met another key's row on the unique key {net.indexes}, "
        "over a column the rows do not carry (generated by the target, or not mapped by the "
        "pair), and updated that row instead. The batch is stopped, not committed. The "
        "target is out of step with the source there: run `setl verify --repair` for the "
        f"table {table} (or remove the target rows holding those unique values), then resume")
