"""One source row change through one pair, the general way: its key, its target's names
(or shard slot), the columns kept and renamed, virtual columns, joined rows and column
groups. :func:`node.extract.etl.transform` runs it for each pair a change's table feeds
(after the pair's processor, if it has one) when not every one of them is simple; when
every one is, the table's changes map through :class:`node.extract.pairs.PlainMapping`,
worked out once per table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from node.changes import CLEAR, ChangeType, Row, RowChange, TargetChange
from node.extract.groups import only_changed
from node.extract.joins import Joined, add_joined, cleared, left, part_changes
from node.extract.pairs import CompiledPair
from node.extract.processors import fill
from node.merge import PartialRow
from shared.errors import ConfigError, TransformError

if TYPE_CHECKING:
    from node.extract.etl import CompiledPipeline


def map_change(compiled: CompiledPipeline, entry: CompiledPair, seq: int, change: RowChange,
               named_by: RowChange | None = None, joined: Joined | None = None
               ) -> Iterator[TargetChange]:
    """The change through one pair: key, target names (or shard slot), columns, virtual
    columns."""
    pair = entry.pair
    source_keys = change.keys or compiled.table_keys.get((change.schema, change.table), ())
    # a keyless table is written in source order, rows found by their whole before image
    # (node.target.mysql.render); only the parts of a wide row (joins, merge_part) need a
    # key to meet by
    keyless = not source_keys and not (pair.joins or pair.merge_part)
    keys = () if keyless else (pair.key_columns or source_keys)
    if not keys and not keyless:
        raise ConfigError(f"pipeline {compiled.pipeline_id}: table "
                          f"{change.schema}.{change.table} has no primary key and no unique "
                          "key over NOT NULL columns, and its pair joins or merges parts of a "
                          "wide row by key; give 'key_columns' on its pair")
    where = entry.where
    if entry.route is not None:
        addressed = list(entry.route.split(change, where))
    else:
        name = named_by or change  # the target is the pair's, whatever a processor renamed
        addressed = [(entry.address(name.schema, name.table), change)]
    target_keys = tuple(entry.renames.get(key, key) for key in keys)
    images = compiled.two_way or compiled.before_images or keyless
    # a part whose row another pair makes (and joins it) writes only where the row is
    made = pair.merge_part and entry.route is None and compiled.where_made(
        entry, change.schema, change.table, addressed[0][0], keys)
    for (datasource, schema, table), one, clears in (
            (address, part, clears) for address, change in addressed
            for part, clears in part_changes(change, keys, pair.merge_part, entry.include)):
        before_key = tuple(one.before[key] for key in keys) if one.before else None
        if before_key is not None and entry.fillers:
            before_key = _filled_key(entry, one.before, keys, target_keys, before_key)
        before = entry.map_row(one.before, keys) if images and one.before is not None else None
        written = only_changed(one, pair.column_groups, keys) if pair.column_groups else one
        after = entry.map_row(written.after, keys) if written.after is not None else None
        if after is not None and clears and before_key is not None:
            after = cleared(after, (filler.name for filler in entry.fillers), target_keys,
                            before_key)
        elif after is not None and entry.fillers:
            after = fill(entry.fillers, one.after, after, where, one.key())  # type: ignore
        if after is not None and pair.joins and one.type is not ChangeType.DELETE:
            after = add_joined(pair.joins, one.after, after, joined or {}, entry.renames)
            if after is None:  # a joined row is missing and the join drops the change (an
                yield from left(pair, one, keys, (datasource, schema, table), target_keys,
                                seq, entry.map_row, entry.renames, before, before_key,
                                (filler.name for filler in entry.fillers))  # update's leaves)
                continue
        if type(written.after) is PartialRow and after is not None:  # column groups
            after = PartialRow(after, entry.map_row(written.after.rest, ()))
        yield TargetChange(datasource, schema, table, one.type, target_keys, before_key,
                           after, pair.push_weight, seq, CLEAR if clears or made else "",
                           before)


def _filled_key(entry: CompiledPair, before: Row, keys: tuple[str, ...],
                target_keys: tuple[str, ...], source_key: tuple[Any, ...]) -> tuple[Any, ...]:
    """The old row's key where a virtual column writes a key column (``id: id + 1000``, two
    tables merged into one): computed from the before image as the new row's is from the
    after image, so an update finds the row it wrote and a delete removes it (the source's
    key would name another row: another source table's, in a merged target). Only the
    virtual columns writing a key column are computed: a free-door or repair ``D`` has the
    key alone as its before image, which another one (``concat_ws(' ', first, last)``)
    cannot be computed from (it paused the pipeline on each resume)."""
    wanted = {name.lower() for name in target_keys}
    keyed = tuple(filler for filler in entry.fillers if filler.name.lower() in wanted)
    if not keyed:
        return source_key
    try:
        made = fill(keyed, before, {}, entry.where, source_key)
    except TransformError:
        if not set(before) <= set(keys):
            raise
        raise TransformError(
            f"{entry.where}: a delete by key alone (a free-door or verify --repair 'D') of "
            f"key {source_key!r}: virtual column(s) {', '.join(f.name for f in keyed)} write "
            "the target's key and read columns the source's key does not have, so the "
            "target row to delete cannot be found. Delete that row on the target by hand "
            "and remove the request from retl.retl_pending and retl.retl_buffer (or write "
            "the key column's expression from the key columns alone), then resume the "
            "channel") from None
    filled = {name.lower(): value for name, value in made.items()}
    return tuple(filled.get(name.lower(), value)
                 for name, value in zip(target_keys, source_key, strict=True))
