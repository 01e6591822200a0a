"""The source table of a target table, for the requests that copy a target's rows again
(:meth:`node.snapshot.door.DoorQueue.displaced`): a row removed on the target is asked for
by its source table's name and key."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from node.extract.etl import CompiledPipeline
from shared.model import Channel
from shared.patterns import WILDCARD_PREFIX, NamePattern, PatternKind


def unsure(compiled: CompiledPipeline, target: tuple[str, str, str]) -> bool:
    """Whether a simple pair taking source tables by a pattern may feed ``target`` under a
    name :func:`sources_of` cannot work back (a family ``orders_[0-3]`` gathered into
    ``orders``, a template ``ods_{table}``): a row displaced there may be one of its tables',
    which nothing asks for again (the door says so)."""
    for entry in compiled.pairs:
        pair = entry.pair
        if entry.routes_for_others or not entry.simple or \
                pair.target.datasource != target[0] or (
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


def sources_of(compiled: CompiledPipeline, target: tuple[str, str, str],
               columns: tuple[str, ...]) -> list[tuple[str, str, list[int]]]:
    """The source tables simple pairs (renames and column choice only) map to ``target``,
    each with the places of its key columns among the target's key ``columns``: several
    where source tables are gathered into one (a row is asked of each; the ones lacking it
    note it missing); none where no such pair does (a processor, a join, a shard route: the
    key may not be the source's)."""
    found: list[tuple[str, str, list[int]]] = []
    for schema, table, entry in _feeding(compiled, target):
        back = {new.lower(): old for old, new in entry.renames.items()}
        named = [back.get(column.lower(), column).lower() for column in columns]
        keys = [key.lower() for key in compiled.configured_keys(schema, table)] or named
        if sorted(keys) != sorted(named):
            continue
        one = (schema, table, [named.index(key) for key in keys])
        if one not in found:
            found.append(one)
    return found


def source_names(compiled: CompiledPipeline, target: tuple[str, str, str]
                 ) -> list[tuple[str, str]]:
    """The source tables simple pairs map to ``target``, whatever their keys (what a
    message names: ``setl snapshot`` and ``setl verify`` take source tables)."""
    return list(dict.fromkeys((schema, table) for schema, table, _ in
                              _feeding(compiled, target)))


def _feeding(compiled: CompiledPipeline, target: tuple[str, str, str]
             ) -> Iterable[tuple[str, str, Any]]:
    """(schema, table, pair entry) of each simple pair that maps a source table to
    ``target``."""
    for entry in compiled.pairs:
        pair = entry.pair
        if entry.routes_for_others or not entry.simple or \
                pair.target.datasource != target[0]:
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
