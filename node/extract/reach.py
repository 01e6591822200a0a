"""Which source tables a pair writes into a target table: whether a target holds the rows of
one source table alone, or of others too (shards gathered into one table, a template or a
family of names reaching the name another pair writes). A DDL that removes rows pauses on
such a target, merge keeps a delete there, verify looks for extra rows only where a target
is a table's own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from shared.model import MediaPair
from shared.patterns import NamePattern, PatternKind

if TYPE_CHECKING:
    from node.extract.pairs import CompiledPair


Address = tuple[str, str, str]  # a target table: (datasource, schema, table)


def _fields_into(source: NamePattern, target: NamePattern, name: str, field: str
                 ) -> list[dict[str, str]]:
    """Which source names a pair's target part (its namespace or table) turns into ``name``:
    for each, the source names it fixes (``schema``, ``table``); {} for a part that does not
    follow the source's name (a literal: every name of the pair's source)."""
    if target.kind is PatternKind.TEMPLATE:
        return target.sources_of(name)
    if target.kind is PatternKind.MULTI:
        index = target.index_of(name)
        if index is None:
            return []
        if source.kind is PatternKind.MULTI:  # sizes alike (checked on load)
            return [{field: source.name_at(source.low + index - target.low)}]
        return [{field: source.literal}] if source.kind is PatternKind.SINGLE else [{}]
    return [{}] if name == target.literal else []


def _names(pattern: NamePattern, bound: str | None) -> list[str | None]:
    """The source names a part may have: the one fixed, a family's, or None for any."""
    if bound is not None:
        return [bound]
    if pattern.kind in (PatternKind.SINGLE, PatternKind.MULTI):
        return list(pattern.names())
    return [None]


def _sources_into(entry: CompiledPair, address: Address
                  ) -> Iterator[tuple[str | None, str | None]]:
    """The source (schema, table) names a pair would write into ``address`` by its names
    (whether it takes them is the caller's question); None for a name its pattern leaves
    open (a pattern of schemas or tables into a name that does not follow it)."""
    source, target = entry.pair.source, entry.pair.target
    if address[0] != target.datasource:
        return
    for by_schema in _fields_into(source.namespace, target.namespace, address[1], "schema"):
        for by_table in _fields_into(source.table, target.table, address[2], "table"):
            if any(by_schema.get(name, value) != value for name, value in by_table.items()):
                continue  # the two parts give one name two values
            bound = {**by_schema, **by_table}
            for schema in _names(source.namespace, bound.get("schema")):
                for table in _names(source.table, bound.get("table")):
                    yield schema, table


def gathers(pair: MediaPair) -> bool:
    """Whether several source tables can land in one target table by ``pair``."""
    source, target = pair.source, pair.target

    def follows(mine: NamePattern, theirs: NamePattern, placeholder: str) -> bool:
        return mine.kind is PatternKind.SINGLE or \
            mine.kind is theirs.kind is PatternKind.MULTI or \
            any(name.kind is PatternKind.TEMPLATE and placeholder in name.text
                for name in (target.namespace, target.table))

    return not (follows(source.table, target.table, "{table}")
                and follows(source.namespace, target.namespace, "{schema}"))


def gathered(compiled: Any, schema: str, table: str) -> bool:
    """Whether a target of a source table may also hold rows of other source tables: its
    pair takes a pattern of tables into a name that does not follow them (shards into
    one table), or a pair writes the same target from another source table it takes (by
    the same name, a template's or a family's, or into a shard route's slot)."""
    mine = compiled.pairs_for(schema, table)
    if any(gathers(entry.pair) for entry in mine):
        return True
    targets = compiled.targets_of(schema, table)
    routes = {id(entry.route) for entry in mine if entry.route is not None}
    for entry in compiled.pairs:
        if entry.route is not None:
            if id(entry.route) not in routes and \
                    any(slot in targets for slot in entry.route.slots):
                return True
        elif any(_writes_from_another(compiled, entry, address, schema, table)
                 for address in targets):
            return True
    return False


def _writes_from_another(compiled: Any, entry: CompiledPair, address: Address, schema: str,
                         table: str) -> bool:
    """Whether a pair writes ``address`` from a source table other than ``schema.table``
    that it takes (a more specific pair may take it instead); a name it leaves open counts
    (which schemas or tables its pattern meets is not known here)."""
    source = entry.pair.source
    for each_schema, each_table in _sources_into(entry, address):
        if (each_schema, each_table) == (schema, table) or \
                (each_schema is not None and
                 not source.namespace.matches_schema(each_schema)) or \
                (each_table is not None and not source.table.matches(each_table)):
            continue
        if each_schema is None or each_table is None or \
                entry in compiled.pairs_for(each_schema, each_table):
            # an open name does not change the address: the checked one stands for it
            if entry.address(each_schema or schema, each_table or table) == address:
                return True
    return False


def parted(compiled: Any, schema: str, table: str) -> bool:
    """Whether a target of a source table holds wide rows, written a part at a time: a
    ``merge_part`` or ``joins`` pair writes it (or may: a name its pattern leaves open)."""
    targets = compiled.targets_of(schema, table)
    return any(any(True for _ in _sources_into(entry, address)) for entry in compiled.pairs
               if entry.pair.merge_part or entry.pair.joins for address in targets)


def writers(compiled: Any, address: Address) -> list[CompiledPair]:
    """The pairs that write (or may: a name their pattern leaves open) ``address``."""
    return [entry for entry in compiled.pairs if any(True for _ in _sources_into(entry, address))]
