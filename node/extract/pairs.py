"""One pair of a compiled pipeline (:class:`node.extract.etl.CompiledPipeline`): how it
names a source table's target, which columns it keeps and renames, and, for a simple pair,
the mapping of one source table's changes worked out once (:class:`PlainMapping`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from node.changes import Row, RowChange, TargetChange
from node.extract.processors import Filler
from node.extract.shard import Route
from shared.model import MediaPair
from shared.patterns import NamePattern, PatternKind


@dataclass(frozen=True)
class CompiledPair:
    pair: MediaPair
    renames: dict[str, str]
    include: frozenset[str]
    exclude: frozenset[str]
    fillers: tuple[Filler, ...] = ()
    route: Route | None = None  # shard routing, shared by the pairs of one route
    routes_for_others: bool = False  # not the route's first pair: it adds slots only
    where: str = ""  # "pipeline P pair S", for error messages (not formatted per row)
    _addresses: dict[tuple[str, str], tuple[str, str, str]] = field(
        default_factory=dict, compare=False, repr=False)
    # ``exclude`` lower-cased: MySQL's column names ignore case, so ``exclude: [Password]``
    # leaves out a column ``password`` (matched as typed, it was copied)
    _excluded: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_excluded", frozenset(name.lower() for name in self.exclude))

    def keeps(self, name: str, keys: Collection[str] = ()) -> bool:
        """Whether the pair writes a source column: a key column always, else one its
        columns list keeps (an excluded name in any case, an included one as typed)."""
        if name in keys:
            return True
        if self.exclude and name.lower() in self._excluded:
            return False
        return not self.include or name in self.include

    def address(self, schema: str, table: str) -> tuple[str, str, str]:
        """The target (datasource, schema, table) of a source table, worked out once."""
        found = self._addresses.get((schema, table))
        if found is None:
            pair, matched = self.pair, (schema, table)
            found = (pair.target.datasource,
                     self.target_name(pair.source.namespace, pair.target.namespace, schema,
                                      matched),
                     self.target_name(pair.source.table, pair.target.table, table, matched))
            self._addresses[(schema, table)] = found
        return found

    @property
    def simple(self) -> bool:
        """Whether a change goes through this pair by renames and column choice alone."""
        pair = self.pair
        return not (pair.processor or self.route is not None or pair.joins or pair.merge_part
                    or pair.column_groups or self.fillers)

    def map_row(self, row: Row, keys: tuple[str, ...]) -> Row:
        if not (self.renames or self.include or self.exclude):
            # nothing to rename or leave out: the row goes as it is, or as a copy when this
            # pair adds to it (a fan-out's other pairs get the same row)
            return row if not (self.fillers or self.pair.joins) else dict(row)
        mapped = {}
        include, excluded = self.include, self._excluded
        for name, value in row.items():
            if name not in keys and ((excluded and name.lower() in excluded) or
                                     (include and name not in include)):
                continue
            mapped[self.renames.get(name, name)] = value
        return mapped

    def target_name(self, source: NamePattern, target: NamePattern, name: str,
                    matched: tuple[str, str] = ("", "")) -> str:
        """The target's name for the source's ``name``; ``matched`` is the source's
        (schema, table), which a template is made of."""
        if target.kind is PatternKind.TEMPLATE:
            return target.render(*matched)
        if target.kind is PatternKind.MULTI:
            if source.kind is not PatternKind.MULTI:  # a one-name family (sizes checked on load)
                return target.name_at(target.low)
            index = source.index_of(name)
            assert index is not None, f"{name} does not match {source}"
            return target.name_at(target.low + index - source.low)
        return target.literal


@dataclass(frozen=True)
class PlainMapping:
    """A simple pair's mapping of one source table: target, keys, columns."""

    datasource: str
    schema: str
    table: str
    keys: tuple[str, ...]  # the source columns a row is keyed by (none: keyless)
    target_keys: tuple[str, ...]
    keyless: bool
    push_weight: int
    entry: CompiledPair

    @classmethod
    def of(cls, entry: CompiledPair, schema: str, table: str,
           source_keys: tuple[str, ...]) -> PlainMapping:
        keys = entry.pair.key_columns or source_keys
        return cls(*entry.address(schema, table), keys,
                   tuple(entry.renames.get(key, key) for key in keys), not source_keys,
                   entry.pair.push_weight, entry)

    def changes(self, seq: int, change: RowChange, two_way: bool) -> TargetChange:
        before, after, keys = change.before, change.after, self.keys
        keyless = self.keyless
        if keyless:
            keys = ()
        mapped_after = self.entry.map_row(after, keys) if after is not None else None
        mapped_before = self.entry.map_row(before, keys) \
            if (two_way or keyless) and before is not None else None
        return _TARGET(TargetChange, (
            self.datasource, self.schema, self.table, change.type,
            () if keyless else self.target_keys,
            tuple([before[k] for k in keys]) if before else None, mapped_after,
            self.push_weight, seq, "", mapped_before, ()))


_TARGET = tuple.__new__
