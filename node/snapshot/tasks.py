"""The reads of a snapshot window: one chunk (or keys asked for) from the source, in the
binlog decoder's form (:mod:`node.extract.reads`) as packed rows for the stream, in a Spark
task; or a chunk as the source's own LOAD DATA lines (:mod:`node.extract.copylines`), in a
thread of the node."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import pymysql

from node.extract import chunks, copylines
from node.extract.copylines import LinesPlan
from node.extract.reads import Read, ReadColumn, loose, mend, packed, select, typed
from shared import confinement
from shared.endpoint import READ_ISOLATION, READING, connect
from shared.errors import SourceError
from shared.keysql import keys_in
from shared.model import DataSource


class ReadTask(NamedTuple):
    """One read of a window: a chunk of a table, or the rows of some keys."""

    window: int
    source: DataSource
    rules: confinement.Confinement  # the node's: a worker reads password files under them
    key: chunks.SplitKey
    columns: tuple[ReadColumn, ...]
    where: str  # the user's condition ("" for none)
    chunk: chunks.Chunk | None = None
    keys: tuple[tuple[Any, ...], ...] = ()  # or: these keys' rows (free-door I/U)
    label: str = ""
    deletes: tuple[tuple[Any, ...], ...] = ()  # and these: deleted, then copied if still there
    lines: LinesPlan | None = None  # a chunk read as LOAD DATA lines (node.extract.copylines)


def run(task: ReadTask) -> Read:
    """Read the task's rows (in a Spark worker, or in the node)."""
    confinement.confine(task.rules)
    key = task.key
    with _reading(task) as cursor:
        if task.chunk is not None:
            condition, params = chunks.condition(key, task.chunk)
        else:
            # each text value converted into its column's charset (keysql: MariaDB's IN
            # list of several keys found no row of a latin1 'é' — a delete asked was then
            # never followed by the row still there, and the target lost it)
            # in its column's collation (a utf8mb4_unicode_ci one: illegal mix of collations)
            described = {column.name: column for column in task.columns}
            condition, params = keys_in(
                key.columns, task.keys + task.deletes,
                [described[c].charset if c in described else None for c in key.columns],
                [described[c].collation if c in described else None for c in key.columns])
        rows = select(cursor, key.schema, key.table, task.columns, _where(task, condition),
                      params)
    names = tuple(column.name for column in task.columns)
    missing: tuple[tuple[Any, ...], ...] = ()
    deletes: tuple[tuple[Any, ...], ...] = ()
    if task.chunk is None:  # the server matched the keys; which are there, said loosely
        at = [names.index(column) for column in key.columns]
        found = {loose([row[i] for i in at]) for row in rows}
        # every key asked deleted is deleted (on every shard slot its key-only image goes
        # to); where the source has the row, the row read is written after it, at once.
        # Its key as the binlog gives it (a BINARY without its padding, a number as a
        # number), as the stream's are; and so is each key asked compared with the rows
        # read (a big5 text's bytes, a padded BINARY, were noted missing, "deleted for
        # good", though their rows were read and written: a review)
        by_name = {column.name: column for column in task.columns}
        if all(c in by_name for c in key.columns):
            asked = [by_name[c] for c in key.columns]
            deletes = typed(asked, mend(asked, task.deletes))
            looked = typed(asked, mend(asked, task.keys))
        else:
            deletes, looked = task.deletes, task.keys
        missing = tuple(keys for keys, seen in zip(task.keys, looked, strict=True)
                        if loose(seen) not in found)
    return Read(task.window, key.schema, key.table, key.columns, names, packed(rows),
                len(rows), task.label, missing=missing, deletes=deletes)


def run_lines(task: ReadTask) -> Read | None:
    """A chunk read as the source's LOAD DATA lines (in a thread of the node: the source
    does the work, and the lines go to Load from here); None where it must be read as rows
    after all (a value past ``group_concat_max_len``, a VALUES tuple past the target's
    max_allowed_packet, an empty ENUM value)."""
    plan, key = task.lines, task.key
    assert plan is not None and task.chunk is not None
    condition, params = chunks.condition(key, task.chunk)
    with _reading(task) as cursor:
        cursor.execute(copylines.query(plan, key.schema, key.table, _where(task, condition)),
                       params)
        count, lines, empty_enum = cursor.fetchone()
    lines = lines or b""
    if empty_enum or not copylines.complete(int(count), lines) or \
            not copylines.fits(plan, lines):
        return None
    return Read(task.window, key.schema, key.table, key.columns,
                tuple(column.name for column in task.columns), lines, int(count), task.label,
                lines=plan)


def _where(task: ReadTask, condition: str) -> str:
    return f"{condition} AND ({chunks.escaped(task.where)})" if task.where else condition


@contextmanager
def _reading(task: ReadTask) -> Iterator[Any]:
    """A cursor on the source, in the sessions chunks are split in; its errors said as the
    read's."""
    key = task.key
    try:
        with connect(task.source, init_command=READING + ", group_concat_max_len = "
                     "@@max_allowed_packet", isolation=READ_ISOLATION) as conn, \
                conn.cursor() as cursor:
            yield cursor
    except pymysql.MySQLError as exc:
        raise SourceError(f"reading {key.schema}.{key.table} ({task.label}) from "
                          f"{task.source.name}: {exc.args[-1] if exc.args else exc}") from None
