"""Rows a window read, written onto a target out of step with another unique key: no row
lands on another key's row.

A row a snapshot chunk or a free-door request read goes as an upsert, ``INSERT … ON
DUPLICATE KEY UPDATE`` without its key columns. On a target in step that upsert meets at
most the row of its own key (the source's unique values are unique). A target out of step —
what snapshots and backfills are run to fix — may hold one of the row's values of another
unique key under *another* key: source (1, slot 5), (2, slot 6); target only (2, slot 5).
The upsert of row 1 would meet row 2 on ``slot`` and update row 2's other columns: row 1
lost, row 2 holding row 1's values under its own key, an image the source never had.

So before the upserts of such rows (only rows read in a window, only into a target table
with a unique key besides the key the rows are found by: the stream's SQL is unchanged),
the same transaction removes the target rows that hold one of their unique values under
another key (:func:`selects` renders the look-up, one per unique key and statement chunk,
``SELECT … FOR UPDATE``; Load runs it with :func:`write`, then, where it found rows, the
``DELETE`` of the same condition, which deletes the rows it locked):

- a chunk read of a whole table (a snapshot): a row so displaced is one the source does not
  have, or one whose own chunk is not copied yet (a chunk copied is in step, and the source
  is unique) — it is copied with its chunk (Load does not tell a chunk's rows from a
  request's: it asks for such a row again too, as below — a second copy that changes
  nothing, or a request noted missing);
- a free-door key read (a backfill, repair's I/U): the row displaced may be outside the
  request. Load hands its key to the pipeline's free door (``Loader.displaced``), which
  keeps an ``I`` request for it in the source's ``retl_pending`` before the target commits
  (a request served twice is harmless): it is copied again in a later window. A key the
  same statement chunk writes anyway is not asked again.

The look-up runs only where a batch holds rows read in a window for such a table; it finds
nothing on a target in step, and then deletes nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from typing import Any

import pymysql

from node.changes import ChangeType, Row, TargetChange
from node.jobs import READ_BIT, Unit
from node.merge import UPSERT, TableWrites
from node.target.mysql.facts import TableFacts, Target
from node.target.mysql.keys import key_padding, key_place, sql_value
from node.target.mysql.sqltext import Sql, literal
from shared.identifiers import qualified, quote, template

log = logging.getLogger("setl.node.target.mysql.displaced")

MARK = "SELECT /* setl:displaced */ "  # a look-up's text begins so (Load runs it itself)
# (target, key columns, keys displaced outside their statement chunk): the free door's hook
Displaced = Callable[[Target, tuple[str, ...], list[tuple[Any, ...]]], None]


def read_rows(changes: Iterable[TargetChange], facts: dict[Target, Any]
              ) -> dict[Target, set[int]]:
    """The rows (by ``id`` of their image: merging keeps it) a window read into a target
    table with a unique key besides theirs, by table; empty for a batch of the stream."""
    found: dict[Target, set[int]] = {}
    tables: dict[Target, bool] = {}
    for change in changes:
        if not change.seq & READ_BIT or change.type is not ChangeType.INSERT or \
                change.after is None:
            continue
        name = (change.datasource, change.schema, change.table)
        other = tables.get(name)
        if other is None:
            table = facts.get(name)
            other = tables[name] = isinstance(table, TableFacts) and \
                bool(_others(table, change.keys))
        if other:
            found.setdefault(name, set()).add(id(change.after))
    return found


def _others(table: TableFacts, keys: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The target's unique keys a row of another key may hold a value of: each but those
    over every key column (two rows of different keys always differ there)."""
    named = frozenset(key.lower() for key in keys)
    return sorted(tuple(sorted(index)) for index in table.unique
                  if not named <= frozenset(column.lower() for column in index))


def sqls(writes: TableWrites, read: set[int], table: TableFacts, size: int,
         rendered: Callable[[TableWrites], list[Sql]]) -> list[Sql] | None:
    """An ordered table's statements (``rendered`` renders a part of its steps) with the
    look-ups of :func:`selects` before each run of rows read; None: it holds none."""
    if not writes.steps or not any(kind == UPSERT and id(item) in read
                                   for kind, item in writes.steps):
        return None
    out: list[Sql] = []
    part: list[tuple[str, Any]] = []
    reading, first = False, True
    for step in [*writes.steps, ("", None)]:
        now = step[0] == UPSERT and id(step[1]) in read
        if part and (now != reading or not step[0]):
            if reading:
                rows = [item for _, item in part]
                for chunk in range(0, len(rows), size):
                    out += selects(writes, rows[chunk:chunk + size], table)
            out += rendered(dataclasses.replace(writes, steps=part) if first else
                            dataclasses.replace(writes, steps=part, deletes=[], upserts=[],
                                                clears=[], changes=[]))
            first = False
            part = []
        reading = now
        part.append(step)
    return out


def selects(writes: TableWrites, rows: list[Row], table: TableFacts) -> list[Sql]:
    """The look-ups of the target rows that hold a unique value of ``rows`` under another
    key (rows with a NULL in a unique key meet no row there): their keys, and whether the
    rows themselves hold that key (written by the same statements: not asked again)."""
    keys, columns = writes.keys, table.columns
    name = qualified(writes.schema, writes.table)
    pad = key_padding(keys, columns)
    key_list = ", ".join(map(quote, keys))
    own = [pad(tuple(row[k] for k in keys)) for row in rows]
    inside = _tuples(keys, own, columns)
    out = []
    for index in _others(table, keys):
        spelt = _spelt(rows[0], index)
        if spelt is None:  # a unique column the rows do not carry (generated, unmapped)
            continue
        upad = key_padding(spelt, columns)
        pairs = [(pad_u, key) for row, key in zip(rows, own, strict=True)
                 if None not in (pad_u := upad(tuple(row.get(c) for c in spelt)))]
        if not pairs:
            continue
        values = _tuples(spelt, list(dict.fromkeys(u for u, _ in pairs)), columns)
        both = _tuples((*spelt, *keys), [(*u, *k) for u, k in pairs], columns)
        where = (f"FROM {name} WHERE ({', '.join(map(quote, spelt))}) IN ({values}) AND "
                 f"({', '.join(map(quote, (*spelt, *keys)))}) NOT IN ({both})")
        # (the delete by the same condition: the rows the look-up found and locked)
        out.append(Sql(f"{MARK}{key_list}, ({key_list}) IN ({inside}) {where} FOR UPDATE", 0,
                       what=f"DELETE {where}"))
    return out


def _spelt(row: Row, index: tuple[str, ...]) -> tuple[str, ...] | None:
    """An index's columns as the rows name them (names ignore case); None: one missing."""
    by_lower = {name.lower(): name for name in row}
    found = tuple(by_lower.get(column.lower()) for column in index)
    return None if None in found else found  # type: ignore[return-value]


def _tuples(names: tuple[str, ...], values: list[tuple[Any, ...]], columns: Any) -> str:
    place = template(key_place(names, columns))
    return ", ".join(place % tuple(literal(sql_value(v)) for v in one) for one in values)


def marked(sql: Sql) -> bool:
    return sql.text.startswith(MARK)


def write(cursor: Any, unit: Unit, sql: Sql, pipeline_id: str, process_id: int,
          hook: Displaced | None) -> int:
    """A look-up run: the rows found deleted by key, logged, and those outside their chunk
    handed to ``hook`` (the free door) before the transaction commits; the rows deleted."""
    keys = unit.keys
    try:
        cursor.execute(sql.text)  # (no arguments: its text is sent as it is)
        found = cursor.fetchall()
        if not found:
            return 0
        displaced = [tuple(row[:len(keys)]) for row in found]
        cursor.execute(sql.what)  # (its text as it is)
    except pymysql.MySQLError as exc:  # same class and code: Load retries go by them
        if len(exc.args) != 2:
            raise
        raise type(exc)(exc.args[0], f"table {unit.schema}.{unit.table}: removing the rows "
                        "that hold a unique value of rows read in a window under another "
                        f"key: {exc.args[1]}") from None
    outside = [key for key, row in zip(displaced, found, strict=True) if not row[len(keys)]]
    log.warning("event=displaced_rows pipeline=%s process_id=%d target=%s table=%s count=%d "
                "asked_again=%d keys=%s", pipeline_id, process_id, unit.datasource,
                f"{unit.schema}.{unit.table}", len(displaced), len(outside),
                [list(key) for key in displaced[:20]])
    if outside:
        if hook is None:
            log.warning("event=displaced_rows_not_asked pipeline=%s target=%s table=%s "
                        "count=%d: no free door to copy them again; run setl verify --repair",
                        pipeline_id, unit.datasource, f"{unit.schema}.{unit.table}",
                        len(outside))
        else:
            hook((unit.datasource, unit.schema, unit.table), keys, outside)
    return len(displaced)
