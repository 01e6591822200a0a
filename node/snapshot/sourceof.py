"""The source table of a target table, for the requests that copy a target's rows again
(:meth:`node.snapshot.door.DoorQueue.displaced`): a row removed on the target is asked for
by its source table's name and key."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

import pymysql

from node.extract.etl import CompiledPipeline
from node.extract.lookup import Lookup
from node.extract.pairs import CompiledPair
from shared.errors import DisplacedStop, SetlError
from shared.identifiers import qualified
from shared.model import Channel, DataSource
from shared.patterns import WILDCARD_PREFIX, NamePattern, PatternKind

log = logging.getLogger("setl.node.snapshot.door")


def unsure(compiled: CompiledPipeline, target: tuple[str, str, str]) -> bool:
    """Whether a pair asked by key (:func:`_askable`; one moving the key stopped the batch
    before this is asked) taking source tables by a pattern may feed ``target`` under a
    name :func:`sources_of` cannot work back (a family ``orders_[0-3]`` gathered into
    ``orders``, a template ``ods_{table}``): a row displaced there may be one of its tables',
    which nothing asks for again (the door says so)."""
    for entry in compiled.pairs:
        pair = entry.pair
        if not _askable(entry, ()) or pair.target.datasource != target[0] or (
                pair.source.namespace.kind is PatternKind.SINGLE and
                pair.source.table.kind is PatternKind.SINGLE):
            continue
        if any(part.kind is PatternKind.SINGLE and part.literal.lower() != name.lower()
               for part, name in ((pair.target.namespace, target[1]),
                                  (pair.target.table, target[2]))):
            continue  # (a literal target of another name)
        schema, table = _guess(compiled, pair, target)
        if entry not in compiled.pairs_for(schema, table) or \
                entry.address(schema, table) != target:
            return True  # (the guess of sources_of is not a table it takes there)
    return False


def _guess(compiled: CompiledPipeline, pair: Any, target: tuple[str, str, str]
           ) -> tuple[str, str]:
    """The source table a pair may feed ``target`` from: its source's names where single,
    the target's where a pattern (an identity pattern's own table)."""
    return compiled.stored(
        pair.source.namespace.literal if pair.source.namespace.kind is PatternKind.SINGLE
        else target[1],
        pair.source.table.literal if pair.source.table.kind is PatternKind.SINGLE
        else target[2])


def _askable(entry: CompiledPair, columns: tuple[str, ...]) -> bool:
    """Whether a row the pair wrote can be asked of its source table by the target's key
    ``columns``: a simple pair (renames and column choice), or one whose virtual columns
    write none of those columns (the source's key is the target's; the row read again is
    filled as the stream fills it)."""
    if entry.routes_for_others:
        return False
    if entry.simple:
        return True
    pair, keys = entry.pair, {column.lower() for column in columns}
    return not (pair.processor or entry.route is not None or pair.joins or pair.merge_part
                or pair.column_groups) and \
        not any(filler.name.lower() in keys for filler in entry.fillers)


def unaskable(compiled: CompiledPipeline, target: tuple[str, str, str],
              columns: tuple[str, ...]) -> list[tuple[CompiledPair, str]]:
    """The pairs of the pipeline that may write ``target`` (:func:`_may_write`) and whose rows
    cannot be asked by the target's key ``columns``, each with why: a row displaced there
    may be theirs, and asked of the other pairs' tables only it would come back missing and
    be deleted for good (a gathered table whose virtual column moves its keys: a review)."""
    found = []
    for entry in compiled.pairs:
        pair = entry.pair
        if pair.target.datasource != target[0] or _askable(entry, columns) or \
                not _may_write(pair, target):
            continue
        keys = {column.lower() for column in columns}
        moved = [filler.name for filler in entry.fillers if filler.name.lower() in keys]
        why = ("it adds shard slots for another pair" if entry.routes_for_others else
               "a processor writes its rows" if pair.processor else
               "it routes rows to shards" if entry.route is not None else
               "it joins other tables" if pair.joins else
               "it writes one part of a wide row" if pair.merge_part else
               "it writes column groups" if pair.column_groups else
               f"virtual column(s) {', '.join(moved)} write the target's key")
        found.append((entry, why))
    return found


class Source(NamedTuple):
    """A source table an askable pair maps to a target table (:func:`sources_of`)."""

    schema: str
    table: str
    order: list[int]  # the places of its key columns among the target's key columns
    keys: tuple[str, ...]  # its key columns (a request's PK_DATA gives them in this order)


def sources_of(compiled: CompiledPipeline, target: tuple[str, str, str],
               columns: tuple[str, ...]) -> list[Source]:
    """The source tables the pairs that can be asked by key (:func:`_askable`: simple
    pairs, or ones whose virtual columns leave the key alone) map to ``target``, each with
    the places of its key columns among the target's key ``columns``: several where source
    tables are gathered into one (a row is asked of each; the ones lacking it note it
    missing). A pair that cannot be asked may write the table too (:func:`unaskable`): the
    door asks only for the rows one of these tables holds (:func:`stopped`)."""
    found: list[Source] = []
    for schema, table, entry in _feeding(compiled, target, columns):
        back = {new.lower(): old for old, new in entry.renames.items()}
        named = [back.get(column.lower(), column) for column in columns]
        keys = list(compiled.configured_keys(schema, table)) or named
        lowered = [name.lower() for name in named]
        if sorted(key.lower() for key in keys) != sorted(lowered):
            continue
        one = Source(schema, table, [lowered.index(key.lower()) for key in keys], tuple(keys))
        if one not in found:
            found.append(one)
    return found


def stopped(compiled: CompiledPipeline, target: tuple[str, str, str],
            not_asked: list[tuple[CompiledPair, str]], found: list[Source],
            alone: list[tuple[Any, ...]]) -> DisplacedStop:
    """The stop where displaced rows of keys ``alone`` (held by none of the tables ``found``)
    may be the rows of pairs that cannot be asked (``not_asked``: :func:`unaskable`)."""
    log.error("event=displaced_rows_not_askable pipeline=%s target=%s table=%s.%s "
              "pairs=%s keys=%d first=%s", compiled.pipeline_id, *target,
              ",".join(str(entry.pair.source) for entry, _ in not_asked), len(alone),
              list(alone[0]))
    tables = ", ".join(qualified(one.schema, one.table) for one in found) or "none"
    return DisplacedStop(
        f"pipeline {compiled.pipeline_id}, target {target[0]}, table "
        f"{target[1]}.{target[2]}: a row it writes (read in a window, or the stream's "
        "into a table being copied) meets another row of the table on a unique key, "
        "and " + "; ".join(
            f"pair {entry.pair.source} -> {entry.pair.target} ({why})"
            for entry, why in not_asked)
        + " may write the table too: that row may be its, which cannot be asked of its "
        f"source table by the target's key, so it is not deleted (the row of key "
        f"{list(alone[0])}" + (f" and {len(alone) - 1} more" if len(alone) > 1 else "")
        + f" is held by none of the tables the door asks ({tables}): asked of them, it "
        "would be deleted for good). The batch is stopped, not "
        "committed. The target is out of step there, or the tables' unique values "
        "overlap: compare the row with each source (setl verify), remove the target row "
        "that is wrong (or give the tables unique values that do not overlap, or map them "
        "to different target tables), then resume the channel")


def held_by_none(source: DataSource, pipeline_id: str, found: list[Source],
                 keys: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The displaced target ``keys`` none of the source tables ``found`` holds now (read
    by their keys, as a request of them would be)."""
    left = list(keys)
    try:
        with Lookup(source) as lookup:
            for one in found:
                if not left:
                    break
                asked = {key: tuple(key[i] for i in one.order) for key in left}
                held = lookup.rows(one.schema, one.table, one.keys, asked.values())
                left = [key for key in left if asked[key] not in held]
    except pymysql.MySQLError as exc:
        raise SetlError(f"pipeline {pipeline_id}: reading {len(keys)} displaced row(s) of "
                        f"{', '.join(qualified(one.schema, one.table) for one in found)} on "
                        f"{source.name}: {exc.args[-1] if exc.args else exc}") from None
    return left


def source_names(compiled: CompiledPipeline, target: tuple[str, str, str]
                 ) -> list[tuple[str, str]]:
    """The source tables simple pairs map to ``target``, whatever their keys (what a
    message names: ``setl snapshot`` and ``setl verify`` take source tables)."""
    return list(dict.fromkeys((schema, table) for schema, table, _ in
                              _feeding(compiled, target, ())))


def _feeding(compiled: CompiledPipeline, target: tuple[str, str, str],
             columns: tuple[str, ...]) -> Iterable[tuple[str, str, Any]]:
    """(schema, table, pair entry) of each pair asked by the target's key ``columns``
    (:func:`_askable`) that maps a source table to ``target``."""
    for entry in compiled.pairs:
        pair = entry.pair
        if not _askable(entry, columns) or pair.target.datasource != target[0]:
            continue
        schema, table = _guess(compiled, pair, target)
        if entry in compiled.pairs_for(schema, table) and \
                entry.address(schema, table) == target:
            yield schema, table, entry


def other_writers(channels: Iterable[Channel], pipeline_id: str,
                  target: tuple[str, str, str]) -> list[str]:
    """The pipelines besides ``pipeline_id`` (of any channel, as ZooKeeper holds them) with a
    pair that may write ``target``: its target datasource the same, and its target names
    able to give the table's (a literal equal, ignoring case; a range, pattern or template
    that can render it). A row of theirs a window's row displaces there cannot be asked of
    this pipeline's source tables (the door stops rather than delete it). Which source
    tables they have is not read: a pair that may write the table counts."""
    found = []
    for channel in channels:
        for pipeline in channel.pipelines:
            other = channel.pipeline_id(pipeline)
            if other != pipeline_id and any(
                    pair.target.datasource == target[0] and _may_write(pair, target)
                    for pair in pipeline.pairs):
                found.append(other)
    return sorted(found)


def _may_write(pair: Any, target: tuple[str, str, str]) -> bool:
    """Whether ``pair`` may write the table: its target names may give the table's, and
    where they are templates, the source names they bind (``{schema}``, ``{table}``) may be
    ones its source patterns take (``re:shop_\\d+`` → ``{schema}`` writes no ``app``: a
    review found every table of the datasource counted)."""
    for bound in _bindings(pair.target.namespace, target[1]):
        for more in _bindings(pair.target.table, target[2]):
            if any(bound.get(field, value) != value for field, value in more.items()):
                continue  # ({schema} bound two ways)
            both = {**bound, **more}
            if _may(pair.source.namespace, both.get("schema")) and \
                    _may(pair.source.table, both.get("table")):
                return True
    return False


def _bindings(pattern: NamePattern, name: str) -> list[dict[str, str]]:
    """The source fields a target name pattern binds in giving ``name`` (none bound: ``{}``;
    no way to give it: empty). Names compared as a server that ignores their case would: in
    doubt, it may."""
    found: list[dict[str, str]] = []
    for each in dict.fromkeys((name, name.lower())):
        if pattern.kind is PatternKind.TEMPLATE:
            found += [bound for bound in pattern.sources_of(each) if bound not in found]
        elif _may(pattern, each) and {} not in found:
            found.append({})
    return found


def _may(pattern: NamePattern, name: str | None) -> bool:
    """Whether a (non-template) name pattern may take ``name`` (None: any)."""
    if name is None or pattern.kind is PatternKind.TEMPLATE:
        return True
    for each in dict.fromkeys((name, name.lower())):
        if pattern.kind is PatternKind.SINGLE:
            if pattern.literal.lower() == each.lower():
                return True
        elif pattern.matches(each):
            return True
    return pattern.kind is PatternKind.WILDCARD and re.fullmatch(
        pattern.text[len(WILDCARD_PREFIX):], name, re.IGNORECASE) is not None
