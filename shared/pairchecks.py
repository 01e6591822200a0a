"""What makes a pipeline's pairs impossible to run beside each other or into their target:
checked by ``setl apply`` (:mod:`shared.definitions`, which names each pair by its place in
the file) and again when a pipeline starts (:mod:`node.start`: a definition written straight
into ZooKeeper, or by an older setl, was never checked as apply checks now)."""

from __future__ import annotations

from collections.abc import Sequence

from shared.model import MediaPair, Pipeline
from shared.patterns import PatternKind


def pairs_problems(pairs: Sequence[MediaPair], names: Sequence[str]) -> list[tuple[int, str]]:
    """(index, why) of pipeline pairs that cannot run beside the others, each pair called
    by its name in ``names``: a pair reading the same source table as an earlier one, unless
    both fan out or both shard (their targets are then the slots of one route), and a pair a
    fan-out pattern shadows (:func:`_shadowed`), and a join that lists no columns. Checked
    at apply, and again when the pipeline
    starts (a definition written straight into ZooKeeper, or by an older setl)."""
    found: list[tuple[int, str]] = []
    seen: dict[tuple[str, str, str], int] = {}
    for at, pair in enumerate(pairs):
        key = (pair.source.datasource, pair.source.namespace.literal,
               pair.source.table.literal)
        earlier = seen.get(key)
        both = (pair, pairs[earlier]) if earlier is not None else ()
        if earlier is not None and not all(p.fan_out for p in both) and \
                not all(p.shard is not None for p in both):
            found.append((at, f"{names[earlier]} already reads {pair.source}; mark both "
                          "'fan_out: true' to split one source table into several targets"))
        elif earlier is not None and pair.shard is not None and (
                apart := pair.settings_apart(pairs[earlier])):
            found.append((at, f"{names[earlier]} also shards {pair.source}, with other "
                          f"{', '.join(apart)}: the pairs of one shard route share its "
                          "settings (only the first's would be used for every slot); give "
                          "them the same settings, their targets aside"))
        seen[key] = at
        bare = [join.table for join in pair.joins if not join.columns]
        if bare:  # (a definition stored by an older setl: apply refuses it now)
            found.append((at, f"its join of {', '.join(bare)} lists no columns; a join adds "
                          "the columns it lists (columns: [...]), so list them"))
    return found + _shadowed(pairs, names)


def _shadowed(pairs: Sequence[MediaPair], names: Sequence[str]) -> list[tuple[int, str]]:
    """Pairs some of whose source tables a fan-out pair of a pattern also reads: a table
    fan-out pairs match goes to them only (shared.model.pairs_taking), so the pair would
    never write it (a numbered family partly covered loses those members' rows). Decided
    where the pair names its tables (SINGLE or MULTI)."""
    found: list[tuple[int, str]] = []
    fan_outs = [(at, pair) for at, pair in enumerate(pairs) if pair.fan_out]
    for at, pair in enumerate(pairs):
        source = pair.source
        if pair.fan_out or not fan_outs or PatternKind.WILDCARD in (
                source.namespace.kind, source.table.kind):
            continue
        key = (source.namespace.literal, source.table.literal)
        for fan_at, fan in fan_outs:
            if (fan.source.namespace.literal, fan.source.table.literal) == key:
                continue  # the same table named twice: pairs_problems reports it
            tables = [(schema, table) for schema in source.namespace.names()
                      for table in source.table.names()]
            taken = [(schema, table) for schema, table in tables
                     if fan.source.namespace.matches_schema(schema) and
                     fan.source.table.matches(table)]
            if taken:
                fan_name = names[fan_at]
                which = "" if len(taken) == len(tables) else " (" + ", ".join(
                    f"{schema}.{table}" for schema, table in taken) + ")"
                found.append((at, (
                    f"{fan_name} ({fan.source} → {fan.target}) has fan_out and also reads "
                    f"{source}{which}: a table fan-out pairs read goes to them only, so this "
                    f"pair would never write {pair.target}{' for those' if which else ''}; "
                    "mark this pair 'fan_out: true' too to write both, or narrow "
                    f"{fan_name}'s pattern to leave {source} out")))
                break
    return found


def lake_pair_problems(pair: MediaPair, lake: str) -> list[tuple[str, str]]:
    """(option, why) of a pair's options that would make a lake table hold other rows than
    the source's: a Delta table's row is written whole (a MERGE sets every column), so a row
    that carries some of its columns would write NULL over the others. Checked at apply,
    and again when the pipeline starts (node.target.delta.tables)."""
    found = []
    if pair.column_groups:
        found.append(("column_groups", (
            f"target {lake} is a lake, whose rows are written whole: with column_groups an "
            "update carries only the changed columns and their groups, and the lake would "
            "get NULL in every other column; leave column_groups out of the pair (a lake "
            "table is written every column anyway)")))
    if pair.merge_part:
        found.append(("merge_part", (
            f"target {lake} is a lake, whose rows are written whole: a merge_part pair's row "
            "carries only its own part's columns, and the lake would get NULL in the other "
            "parts' columns; give each part its own lake table (joined when read), or write "
            "the wide table into a database target")))
    return found


def two_way_pair_problems(pipeline: Pipeline) -> list[str]:
    """Why pairs of a two-way channel's pipeline cannot keep both sides alike: when both
    sides write a key, the first pipeline's change overwrites the other side's row
    (node.target.mysql.twoway), which makes them alike only when the change carries the
    whole row. Checked at apply, and again when the pipeline starts."""
    found = []
    why = ("on a two-way channel a key both sides wrote is settled by the first pipeline's "
           "change overwriting the other side's row, and {what}, so the two sides would keep "
           "different values in the other columns; {fix}, or give these tables a one-way "
           "channel")
    for pair in pipeline.pairs:
        where = f"pipeline {pipeline.name} pair {pair.source} → {pair.target}"
        if pair.column_groups:
            found.append(f"{where} has column_groups: " + why.format(
                what="with column groups an update carries only its changed columns and "
                "their groups", fix="leave column_groups out of the pair"))
        if pair.merge_part or pair.joins:
            option = "merge_part" if pair.merge_part else "joins"
            found.append(f"{where} has {option}: " + why.format(
                what="its change carries only its part of a wide row" if pair.merge_part
                else "its rows carry columns looked up in another table, which the other "
                "direction does not write back", fix=f"leave {option} out of the pair"))
    into: dict[tuple[str, str, str], MediaPair] = {}
    for pair in pipeline.pairs:
        target = pair.target
        if pair.shard is not None or target.namespace.kind is not PatternKind.SINGLE or \
                target.table.kind is not PatternKind.SINGLE:
            continue
        name = (target.datasource, target.namespace.literal, target.table.literal)
        other = into.setdefault(name, pair)
        if other is not pair:
            found.append(f"pipeline {pipeline.name}: pairs {other.source} and {pair.source} "
                         f"both write {target}: " + why.format(
                             what="each source table's change carries only its own part of "
                             "the row", fix="give each source table its own target table"))
    return found
