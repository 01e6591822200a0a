"""A rendered statement, and the groups of rows the renderers make statements of.

:class:`Statement` is what :mod:`node.target.mysql.render` (a keyed table's writes) and
:mod:`node.target.mysql.keyless` (a keyless table's changes) give Load: SQL with its
arguments and what Load needs to run and check it. The rows go a chunk of at most the
batch size at a time (:func:`chunks`), a run of rows with one column set per multi-row
statement (:func:`runs`), without the target's generated columns (:func:`without`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from node.changes import Row
from node.merge import PartialRow


class Statement(NamedTuple):
    """One statement Load runs, with what it writes and how Load checks it."""

    sql: str
    args: Any
    many: bool  # executemany
    what: list[Any]  # the keys or rows it writes (for the log when a row is skipped)
    matches_one: bool = False  # an UPDATE/DELETE of a keyless table: touches exactly one row
    # ENUM columns this one-row statement gives the empty value, which a lenient source
    # stores for an invalid one and a strict target refuses: Load writes the row leniently
    # and accepts no warning but theirs
    lenient: tuple[str, ...] = ()
    # it goes on writing the row of the statement before it (a big value's next piece): a
    # row refused in one-by-one mode is skipped with all of its statements
    continues: bool = False


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    """``items`` a statement's worth (``size``) at a time."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


def without(rows: list[Row], columns: frozenset[str]) -> list[Row]:
    """``rows`` without ``columns`` (the target's generated ones: never written)."""
    if not columns:
        return rows
    return [like(row, {name: value for name, value in row.items() if name not in columns},
                 columns) for row in rows]


def like(row: Row, values: Row, left_out: frozenset[str] = frozenset()) -> Row:
    """``values`` as the kind of row ``row`` is (a partial row keeps its rest, but for the
    ``left_out`` columns)."""
    if type(row) is not PartialRow:
        return values
    return PartialRow(values, {name: value for name, value in row.rest.items()  # type: ignore
                               if name not in left_out})


def runs(rows: list[Row]) -> Iterator[tuple[Any, list[Row]]]:
    """Consecutive rows with the same columns (the column set changes after an ALTER); a
    partial row's are its columns and its rest's."""
    current: Any = None
    run: list[Row] = []
    for row in rows:
        names = tuple(row) if type(row) is not PartialRow else \
            (tuple(row), tuple(row.rest))  # type: ignore[attr-defined]
        if names != current and run:
            yield current, run  # type: ignore[misc]
            run = []
        current = names
        run.append(row)
    if run:
        yield current, run  # type: ignore[misc]
