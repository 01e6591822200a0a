"""What a Spark task does for a snapshot: read one chunk (or keys asked for) from the source,
in the binlog decoder's form (:mod:`node.extract.reads`), as packed rows for the stream."""

from __future__ import annotations

from typing import Any, NamedTuple

import pymysql

from node.extract import chunks
from node.extract.reads import Read, ReadColumn, packed, select
from shared import confinement
from shared.endpoint import connect
from shared.errors import SourceError
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
    keys: tuple[tuple[Any, ...], ...] = ()  # or: these keys' rows
    label: str = ""


def run(task: ReadTask) -> Read:
    """Read the task's rows (in a Spark worker or in the node)."""
    confinement.confine(task.rules)
    key = task.key
    try:
        with connect(task.source, init_command="SET time_zone = '+00:00'") as conn, \
                conn.cursor() as cursor:
            if task.chunk is not None:
                condition, params = chunks.condition(key, task.chunk)
            else:
                one = "(" + ", ".join(["%s"] * len(key.columns)) + ")"
                columns = ", ".join(f"`{c.replace('`', '``')}`" for c in key.columns)
                condition = f"({columns}) IN ({', '.join([one] * len(task.keys))})"
                params = [value for keys in task.keys for value in keys]
            if task.where:
                condition = f"{condition} AND ({chunks.escaped(task.where)})"
            rows = select(cursor, key.schema, key.table, task.columns, condition, params)
    except pymysql.MySQLError as exc:
        raise SourceError(f"reading {key.schema}.{key.table} ({task.label}) from "
                          f"{task.source.name}: {exc.args[-1] if exc.args else exc}") from None
    names = tuple(column.name for column in task.columns)
    missing: tuple[tuple[Any, ...], ...] = ()
    if task.chunk is None:
        at = [names.index(column) for column in key.columns]
        found = {tuple(row[i] for i in at) for row in rows}
        missing = tuple(keys for keys in task.keys if keys not in found)
    return Read(task.window, key.schema, key.table, key.columns, names, packed(rows),
                len(rows), task.label, missing=missing)
