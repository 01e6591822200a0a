"""The SQL Load writes for a keyless table's share of a batch.

A **keyless** table (no primary key, no unique key over NOT NULL columns): every change in
source order, as native row replication applies it. Consecutive inserts are one multi-row
``INSERT``; an update or a delete finds its row by the full before image and touches one
row (``LIMIT 1``), so duplicate rows and NULLs survive. Values are matched exactly: strings
byte for byte in their column's charset (a case-insensitive or PAD SPACE collation would
match ``'a'`` to ``'A '``), binary values and geometries as bytes, FLOAT as the double it
holds, NULL with ``IS NULL``. Such a statement must touch exactly one row; Load checks it.
Generated columns are never written nor matched on, and a row that would not fit the
target's ``max_allowed_packet`` stops the pipeline before anything is sent (no key to write
it a piece at a time by). A keyed table's writes are :mod:`node.target.mysql.render`'s.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from node.changes import ChangeType, TargetChange, differs
from node.merge import TableWrites
from node.target.mysql import pieces
from node.target.mysql.keys import binary_widths, exact_match, sql_value
from node.target.mysql.statement import Statement, chunks, runs, without
from shared.identifiers import qualified, quote

if TYPE_CHECKING:  # (render imports this module)
    from node.target.mysql.render import Columns


def statements(writes: TableWrites, size: int, columns: Columns, generated: frozenset[str],
               space: int = 0, packet: int = 0) -> Iterator[Statement]:
    """A keyless table's changes (see the module); ``space``: a row is checked against it
    (see :func:`node.target.mysql.render.statements`), none where 0."""
    table = qualified(writes.schema, writes.table)
    widths = binary_widths(columns) if writes.changes else {}
    for kind, group in itertools.groupby(writes.changes, key=lambda change: change.type):
        changes = list(group)
        if space:
            for change in changes:
                pieces.whole(writes, change, space, packet)
        if kind is ChangeType.INSERT:
            rows = without([change.after for change in changes if change.after], generated)
            for names, run in runs(rows):
                sql = (f"INSERT INTO {table} ({', '.join(map(quote, names))}) VALUES "
                       f"({', '.join(['%s'] * len(names))})")
                for chunk in chunks(run, size):
                    yield Statement(sql, [[row[c] for c in names] for row in chunk], True,
                                    chunk)
            continue
        for change in changes:
            found = _one(table, change, columns, generated, widths)
            if found is not None:
                yield found


def _one(table: str, change: TargetChange, columns: Columns, generated: frozenset[str],
         widths: dict[str, int]) -> Statement | None:
    """The UPDATE or DELETE of one keyless row, found by its before image (None: an update
    that changes none of the target's columns)."""
    before = {name: value for name, value in (change.before or {}).items()
              if name not in generated}
    if not before:
        raise ValueError(f"a {change.type.name} of keyless table {table} has no before image")
    where, args = exact_match(before, columns, widths)
    if change.type is ChangeType.DELETE:
        return Statement(f"DELETE FROM {table} WHERE {where} LIMIT 1", args, False,
                         [change.before], True)
    after = {name: value for name, value in (change.after or {}).items()
             if name not in generated}
    if not any(name not in before or differs(before[name], value)
               for name, value in after.items()):
        return None
    # every column set, the unchanged ones too: a target column ON UPDATE CURRENT_TIMESTAMP
    # (a table's first TIMESTAMP before MariaDB 10.10) left out would take the target's time
    assignments = ", ".join(f"{quote(name)} = %s" for name in after)
    return Statement(f"UPDATE {table} SET {assignments} WHERE {where} LIMIT 1",
                     [sql_value(value) for value in after.values()] + args, False,
                     [change.after], True)
