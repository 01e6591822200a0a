"""Column groups: with groups on a pair, an update writes only what changed — the key, the
changed columns, and every column of a group one of whose columns changed — on a row the
target has. Where the target lacks the row (a snapshot or free-door copy that the stream's
update of the key replaces, a pipeline started at ``latest``), the update makes it whole: its
row is a :class:`~node.merge.PartialRow` holding the other columns of the source row, which
only the INSERT of the upsert writes (``INSERT (every column) … ON DUPLICATE KEY UPDATE`` the
changed ones).

Columns outside the groups that did not change are left as the target has them (another
writer, a wide-row part, a manual fix). A group column the change does not carry (a
processor dropped it, or it came from a narrower image) is looked up from the source: the
pass after Extract/Transform collects such holes per partition and fills them with one
query per table and chunk (:func:`fill_holes`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from node.changes import ChangeType, Row, RowChange, TargetChange, differs
from node.extract.lookup import Lookup
from node.merge import PartialRow
from shared.model import ColumnGroup, DataSource


@dataclass(frozen=True)
class Hole:
    """A group column to look up: source table, key and column, and its target name."""

    schema: str
    table: str
    keys: tuple[str, ...]
    key: tuple[Any, ...]
    column: str


def only_changed(change: RowChange, groups: tuple[ColumnGroup, ...],
                 keys: tuple[str, ...]) -> RowChange:
    """An update reduced to key + changed columns + whole groups of changed columns (an
    insert, and an update that moves the row to another key, keep every column: the row
    under its new key is a new one on the target); a hole stands for a group column the
    change does not carry. The reduced row is a :class:`PartialRow` whose rest is the other
    columns of the after image (for a target that lacks the row)."""
    if change.after is None:
        return change
    before, after = change.before or {}, change.after
    changed = set(after) if change.type is ChangeType.INSERT or any(
        name not in before or before[name] != after.get(name) for name in keys) else {
        name for name, value in after.items() if name not in before or
        differs(before[name], value)}
    wanted = set(keys) | changed
    for group in groups:
        if changed & set(group.columns):
            wanted |= set(group.columns)
    key = tuple(after[name] for name in keys)
    reduced: Row = {}
    for name in wanted:
        reduced[name] = after[name] if name in after else Hole(
            change.schema, change.table, keys, key, name)
    ordered = {name: reduced[name] for name in [*after, *sorted(set(reduced) - set(after))]
               if name in reduced}
    rest = {name: value for name, value in after.items() if name not in reduced}
    return change._replace(after=PartialRow(ordered, rest) if rest else ordered)


def fill_holes(source: DataSource | None, changes: list[TargetChange]) -> list[TargetChange]:
    """The changes with every hole filled from the source; a row gone from the source
    leaves NULL (its delete follows in the binlog)."""
    holes = [value for change in changes if change.after
             for value in change.after.values() if isinstance(value, Hole)]
    if not holes:
        return changes
    assert source is not None, "column-group lookups need the pipeline's source"
    found: dict[tuple[str, str], dict[tuple[Any, ...], Row]] = {}
    with Lookup(source) as fetch:
        for (schema, table, keys), wanted in _by_table(holes).items():
            found[(schema, table)] = fetch.rows(schema, table, keys, wanted)
    filled = []
    for change in changes:
        if change.after and any(isinstance(v, Hole) for v in change.after.values()):
            after = {name: (found[(v.schema, v.table)].get(v.key, {}).get(v.column)
                            if isinstance(v, Hole) else v) for name, v in change.after.items()}
            if type(change.after) is PartialRow:
                after = PartialRow(after, change.after.rest)
            change = change._replace(after=after)
        filled.append(change)
    return filled


def _by_table(holes: Iterable[Hole]) -> dict[tuple[str, str, tuple[str, ...]],
                                              list[tuple[Any, ...]]]:
    tables: dict[tuple[str, str, tuple[str, ...]], list[tuple[Any, ...]]] = {}
    for hole in holes:
        tables.setdefault((hole.schema, hole.table, hole.keys), []).append(hole.key)
    return tables
