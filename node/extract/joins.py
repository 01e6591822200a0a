"""N:1 table merges: several source tables writing parts of one wide target row.

Each part is a pair whose key is the wide row's key (``key_columns`` + a rename), listing
its own columns. ``joins`` add another source table's columns to each row, looked up by key
(one :class:`~node.extract.lookup.Lookup` per Spark partition, values batched per table); a missing
row drops the change (``missing: drop``, the default) or keeps it as it is (``keep``). A
dropped insert writes nothing; a dropped update takes the row out of the target (the row
left the joined set: its delete, or for a ``merge_part`` pair the clear of its part and of
the joined columns), so the target never keeps the row as it was before the update. A pair
with ``merge_part: true`` does not delete the wide row when its source row goes: it clears
its own columns where the wide row is (an UPDATE that never makes the row; a change of its
key clears the old key's and writes the new one's); where another pair makes the wide row
and joins the part's table for all its columns, every write of the part is such an UPDATE
(:func:`where_made`). The loader writes only the columns a
change carries, and the batch merge combines the parts of one key, so the parts never
overwrite each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from node.changes import CLEAR, ChangeType, Row, RowChange, TargetChange
from node.extract.lookup import Lookup
from shared.model import DataSource, LookupJoin, MediaPair

if TYPE_CHECKING:
    from node.extract.pairs import CompiledPair

# (table, key column) → key value → the looked-up row
Joined = dict[tuple[str, str], dict[Any, Row]]


def look_up_joins(source: DataSource | None,
                  wanted: Iterable[tuple[RowChange, tuple[LookupJoin, ...]]]) -> Joined:
    """The rows every join of these changes needs, one query per table and chunk."""
    values: dict[tuple[str, str], set[Any]] = {}
    for change, joins in wanted:
        image = change.after if change.after is not None else change.before
        for join in joins:
            value = by_value(image or {}, join.by)
            if value is not None:
                values.setdefault((join.table, join.key), set()).add(value)
    if not values:
        return {}
    assert source is not None, "joins need the pipeline's source"
    found: Joined = {}
    with Lookup(source) as fetch:
        for (table, key), keys in values.items():
            schema, _, name = table.partition(".")
            found[(table, key)] = fetch.matched(schema, name, key, keys)
    return found


def by_value(row: Row, by: str) -> Any:
    """The row's value of a join's ``by`` column, its name matched without case as MySQL
    matches column names (``by: ID`` reads ``id``): read as typed it found no joined row."""
    if by in row:
        return row[by]
    wanted = by.lower()
    return next((value for name, value in row.items() if name.lower() == wanted), None)


def add_joined(joins: tuple[LookupJoin, ...], source_row: Row, target_row: Row,
               joined: Joined, renames: dict[str, str]) -> Row | None:
    """The target row with the joined tables' columns; None when a join drops it."""
    for join in joins:
        row = joined.get((join.table, join.key), {}).get(by_value(source_row, join.by))
        if row is None:
            if join.missing == "drop":
                return None
            continue
        for column in join.columns:
            target_row[renames.get(column, column)] = row[column]
    return target_row


def part_changes(change: RowChange, keys: tuple[str, ...], merge_part: bool = True,
                 columns: Iterable[str] = ()) -> Sequence[tuple[RowChange, bool]]:
    """A ``merge_part`` pair's change as the wide row takes it, each with whether it clears
    the part: a delete clears the part's columns (the wide row stays, and is not made when it
    is not there); a change of the key clears the part at the old key and writes it at the
    new one (the wide row of the old key is another part's too: it was deleted whole).
    ``columns``: the part's columns (its pair's ``include``), cleared too where a delete's
    image holds only the key (a free-door ``D``). Not ``merge_part``: the change as it is."""
    if not merge_part:
        return ((change, False),)
    if change.type is ChangeType.DELETE:
        return [(clear_part(change, keys, columns), True)]
    if change.type is ChangeType.UPDATE and change.before is not None and \
            change.after is not None and \
            any(change.before.get(key) != change.after.get(key) for key in keys):
        gone = RowChange(change.schema, change.table, ChangeType.DELETE, keys, change.before,
                         None, commit_ts_ms=change.commit_ts_ms)
        moved = RowChange(change.schema, change.table, ChangeType.INSERT, keys, None,
                          change.after, commit_ts_ms=change.commit_ts_ms)
        return [(clear_part(gone, keys), True), (moved, False)]
    return [(change, False)]


def clear_part(change: RowChange, keys: tuple[str, ...], columns: Iterable[str] = ()
               ) -> RowChange:
    """A delete of a wide row's part as an update setting that part's columns to NULL (those
    of its image, and ``columns``: a free-door ``D`` has the key alone, and the free door
    refuses it for a pair that does not list its columns)."""
    before = change.before or {}
    after = {name: (value if name in keys else None) for name, value in before.items()}
    after.update((name, None) for name in columns if name not in after)
    return RowChange(change.schema, change.table, ChangeType.UPDATE, keys, before, after,
                     commit_ts_ms=change.commit_ts_ms)


def cleared(after: Row, virtual: Iterable[str], target_keys: tuple[str, ...],
            key: tuple[Any, ...]) -> Row:
    """A cleared part's target row: at the key the part was written at (a virtual key
    column's, computed from the old row), its other virtual columns NULL (a constant, or an
    expression over the cleared columns, would write a value no source row holds)."""
    keyed = {name.lower() for name in target_keys}
    after.update((name, None) for name in virtual if name.lower() not in keyed)
    after.update(zip(target_keys, key, strict=True))
    return after


def left(pair: MediaPair, change: RowChange, keys: tuple[str, ...],
         address: tuple[str, str, str], target_keys: tuple[str, ...], seq: int,
         map_row: Callable[[Row, tuple[str, ...]], Row], renames: dict[str, str],
         before: Row | None, before_key: tuple[Any, ...] | None,
         virtual: Iterable[str] = ()) -> Iterator[TargetChange]:
    """What an update the joins drop writes: the row leaves the target (its delete; a
    ``merge_part`` pair's part, virtual and joined columns cleared), as the row would never
    have come had it been inserted so; nothing for an insert (nothing was written).
    ``before_key``: the key the row was written at (a virtual key column's, from the old
    row: the source's key may name another table's row in a merged target)."""
    if change.type is not ChangeType.UPDATE or change.before is None or before_key is None:
        return
    if not pair.merge_part:
        yield TargetChange(*address, ChangeType.DELETE, target_keys, before_key, None,
                            pair.push_weight, seq, "", before)
        return
    after = cleared(map_row(clear_part(change, keys).after or {}, keys), virtual, target_keys,
                    before_key)
    after.update((renames.get(c, c), None) for join in pair.joins for c in join.columns)
    yield TargetChange(*address, ChangeType.UPDATE, target_keys, before_key, after,
                        pair.push_weight, seq, CLEAR, before)


def where_made(part: CompiledPair, table: str, keys: tuple[str, ...],
               target_keys: tuple[str, ...], others: Iterable[CompiledPair]) -> bool:
    """Whether a ``merge_part`` pair writes only where its wide row is (as a clear does):
    another pair of the target, not ``merge_part``, makes the row and joins the part's
    ``table`` (``schema.table``) on the part's key (``keys``) by the wide row's key, for every
    column the part writes. That
    pair's row then holds the part as the source has it when the row changes, so the part's
    own write after the row's delete, or after its insert the join dropped (``missing:
    drop``), must not make the row again (an orphan of the part's columns alone). A part
    whose columns no such join brings makes the row as ever: written first (a snapshot
    copy), its columns would be lost otherwise."""
    if len(keys) != 1 or not part.include or any(
            filler.name.lower() != target_keys[0].lower() for filler in part.fillers):
        return False
    written = {part.renames.get(name, name) for name in part.include} - set(target_keys)
    for other in others:
        if other.pair.merge_part:
            continue
        for join in other.pair.joins:
            if join.table == table and join.key == keys[0] and \
                    other.renames.get(join.by, join.by).lower() == target_keys[0].lower() and \
                    written <= {other.renames.get(name, name) for name in join.columns}:
                return True
    return False
