"""Extract and Transform as plain functions on rows; Spark only maps them over partitions.

A pipeline definition is compiled once per version into :class:`CompiledPipeline` (pairs
indexed by source table; each pair is :mod:`node.extract.pairs`), which is what Spark
broadcasts. ``extract_transform`` maps one
source row change through every pair that matches its table into target changes (each
pair's mapping: :mod:`node.extract.mapping`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from node.changes import ChangeType, RowChange, TargetChange
from node.ddl import extract_ddl
from node.extract import layouts, reach
from node.extract.groups import fill_holes
from node.extract.joins import Joined, look_up_joins, where_made
from node.extract.lookup import Lookup
from node.extract.mapping import map_change
from node.extract.pairs import CompiledPair, PlainMapping
from node.extract.processors import Filler, run_processor
from node.extract.shard import routes
from shared import confinement
from shared.errors import ConfigError
from shared.identifiers import folded, lowered
from shared.model import BinlogPosition, ColumnMode, DataSource, Pipeline, pairs_taking


def processor_problems(pipeline: Pipeline) -> list[str]:
    """Why processors and virtual-column functions of ``pipeline`` may not run under this
    node's rules: checked when the pipeline starts, before a row or a module is touched (a
    definition written straight into ZooKeeper was never checked by a manager)."""
    rules = confinement.current()
    names = [name for pair in pipeline.pairs
             for name in (pair.processor, *(c.processor for c in pair.virtual_columns))
             if name is not None]
    return [problem for name in dict.fromkeys(names)
            if (problem := rules.processor_problem(name)) is not None]


@dataclass(frozen=True)
class CompiledPipeline:
    """What Extract/Transform needs of a pipeline, built once per definition version."""

    pipeline_id: str
    version: int
    pairs: tuple[CompiledPair, ...]
    # row keys of source tables without a primary key (their first NOT NULL unique key),
    # read from the source when the pipeline starts
    table_keys: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    # the source's binlog end read just after table_keys were (None: not known): a DDL
    # logged past it ran after they were read (node.ddlpauses.keyed_before)
    keys_read_at: BinlogPosition | None = None
    ddl_sync: bool = False
    two_way: bool = False  # keep before images for the conflict check
    before_images: bool = False  # keep them for a changelog (a lake table's mode), a
    # subscription
    # the targets add a source's new columns themselves, ddl_sync or not (a lake's): an
    # ALTER TABLE of a replicated table goes to them without ddl_sync too, to be checked
    follows_columns: bool = False
    source: DataSource | None = None  # for lookups (the free door)
    # the source folds names (lower_case_table_names 1; read at start): a DDL's names as
    # typed are matched lower-cased, as its table maps have them ("TRUNCATE TABLE Orders")
    fold_names: bool = False
    # the source keeps names as created but compares them without case (2): its tables'
    # names by their lowered ones (a database's under (name, "")), read at start and after
    # each DDL; a DDL's names as typed are matched through them ("TRUNCATE TABLE ORDERS")
    blind_names: dict[tuple[str, str], tuple[str, str]] | None = None
    # each MySQL target's lower_case_table_names, read at start (checked again after a DDL)
    target_cases: dict[str, int] = field(default_factory=dict)
    # what the node's configuration lets a definition reach (password files, processors):
    # a Spark worker runs under the node's rules, not its own defaults
    rules: confinement.Confinement = field(default_factory=confinement.current)
    _cache: dict[tuple[str, str], tuple[CompiledPair, ...]] = field(
        default_factory=dict, compare=False, repr=False)
    _plain: dict[tuple[str, str, tuple[str, ...]], tuple[PlainMapping, ...] | None] = field(
        default_factory=dict, compare=False, repr=False)
    # each table's columns as its last layout checked had them (a pattern pair's columns
    # gone from a table are those it had: :func:`node.extract.layouts.layout_problem`)
    _layouts: dict[tuple[str, str], tuple[str, ...]] = field(
        default_factory=dict, compare=False, repr=False)
    # what each pair writes of each table into each target, for parts of a wide row
    # (:func:`node.extract.layouts.overlapping_part`)
    _written: layouts.Written = field(default_factory=dict, compare=False, repr=False)
    # whether a merge_part pair writes a target only where its row is (:meth:`where_made`)
    _made: dict[tuple[int, tuple[str, str, str], tuple[str, ...]], bool] = field(
        default_factory=dict, compare=False, repr=False)

    @classmethod
    def compile(cls, pipeline_id: str, version: int, pipeline: Pipeline,
                two_way: bool = False, source: DataSource | None = None,
                before_images: bool = False, follows_columns: bool = False
                ) -> CompiledPipeline:
        """``before_images``: every change keeps its whole before image (a subscription's
        reader gets it), as a changelog pair's does."""
        refused = processor_problems(pipeline)
        if refused:
            raise ConfigError(f"pipeline {pipeline_id}: " + "; ".join(refused))
        compiled = []
        shard_routes = routes(pipeline.pairs)
        for index, pair in enumerate(pipeline.pairs):
            renames = {column.source: column.target for column in pair.column_pairs}
            include = frozenset(pair.columns) if pair.column_mode is ColumnMode.INCLUDE \
                else frozenset()
            exclude = frozenset(pair.columns) if pair.column_mode is ColumnMode.EXCLUDE \
                else frozenset()
            fillers = tuple(Filler.of(column) for column in pair.virtual_columns)
            route, first = shard_routes.get(index, (None, True))
            compiled.append(CompiledPair(pair, renames, include, exclude, fillers, route,
                                         not first, f"pipeline {pipeline_id} pair {pair.source}"))
        return cls(pipeline_id, version, tuple(compiled), ddl_sync=pipeline.params.ddl_sync,
                   two_way=two_way, source=source,
                   before_images=before_images or
                   any(pair.mode == "changelog" for pair in pipeline.pairs),
                   follows_columns=follows_columns)

    def pairs_for(self, schema: str, table: str) -> tuple[CompiledPair, ...]:
        """The pairs a table feeds: the most specific match, or every fan-out pair."""
        found = self._cache.get((schema, table))
        if found is not None:
            return found
        found = pairs_taking((c for c in self.pairs if not c.routes_for_others), schema, table,
                             lambda c: c.pair)
        self._cache[(schema, table)] = found
        return found

    def stored(self, schema: str, table: str) -> tuple[str, str]:
        """A table's names as the source stores them (and its binlog gives them), from
        names as a user or a DDL typed them: lower-cased where the source folds names, as
        created where it compares them without case."""
        if self.fold_names:
            return folded(schema), folded(table)
        if self.blind_names is not None:  # (a table not known yet: in its known database)
            found = self.blind_names.get((lowered(schema), lowered(table)))
            return found if found is not None else (self.stored_schema(schema), table)
        return schema, table

    def stored_schema(self, schema: str) -> str:
        """A database's name as the source stores it (:meth:`stored`)."""
        if self.fold_names:
            return folded(schema)
        if self.blind_names is not None:
            return self.blind_names.get((lowered(schema), ""), (schema, ""))[0]
        return schema

    def wants(self, schema: str, table: str) -> bool:
        return bool(self.pairs_for(*self.stored(schema, table)))

    def wants_schema(self, schema: str) -> bool:
        """Whether any pair may want a table of ``schema`` (Select drops the rest unparsed)."""
        schema = self.stored_schema(schema)
        return any(c.pair.source.namespace.matches_schema(schema) for c in self.pairs)

    def key_columns(self, schema: str, table: str) -> tuple[str, ...]:
        """The ``key_columns`` of the pair that takes a table (its first, when several fan
        out); () for none."""
        pairs = self.pairs_for(schema, table)
        return pairs[0].pair.key_columns if pairs else ()

    def configured_keys(self, schema: str, table: str) -> tuple[str, ...]:
        """Key columns known without asking the source: the pair's, or read at start."""
        return self.key_columns(schema, table) or \
            self.table_keys.get((schema, table), ())

    def database_defaults(self, schema: str) -> tuple[str, str]:
        """A source database's default charset and collation (("", "") without a source)."""
        if self.source is None:
            return "", ""
        with Lookup(self.source) as lookup:
            return lookup.database_defaults(schema)

    def targets_of(self, schema: str, table: str) -> list[tuple[str, str, str]]:
        """(datasource, schema, table) of every table a source table's rows may go to: its
        pairs' targets, every slot of a shard route."""
        schema, table = self.stored(schema, table)
        found: list[tuple[str, str, str]] = []
        for entry in self.pairs_for(schema, table):
            if entry.route is not None:
                found.extend(entry.route.slots)
            else:
                found.append(entry.address(schema, table))
        return list(dict.fromkeys(found))

    def layout_problem(self, schema: str, table: str, columns: tuple[str, ...],
                       key: tuple[str, ...] = ()) -> str | None:
        """Why a table's columns (a new table map's, ``key`` its primary key) do not fit its
        pairs: a column a pair includes is gone (renamed or dropped), two land on one target
        column (a rename onto a column the source has), or two tables' parts of a wide row
        on one: :mod:`node.extract.layouts`. A pattern pair's column is gone only where the
        table's previous layout checked in this run held it."""
        before = self._layouts.get((schema, table))
        entries, keys = self.pairs_for(schema, table), self.configured_keys(schema, table)
        keyed = bool(key or self.table_keys.get((schema, table)))
        problem = layouts.layout_problem(self.pipeline_id, entries, schema, table, columns,
                                         keys, before, keyed) or layouts.overlapping_part(
            self.pipeline_id, entries, schema, table, columns, keys or key, self._written,
            {index: entry.address(schema, table) for index, entry in enumerate(entries)
             if entry.route is None})
        if problem is None:
            self._layouts[(schema, table)] = columns
        return problem

    def altered(self, schema: str, table: str) -> None:
        """A DDL of a source table was read: what its pairs wrote of it is known again at its
        next layout (:func:`node.extract.layouts.altered`)."""
        layouts.altered(self._written, *self.stored(schema, table))

    def gathered(self, schema: str, table: str) -> bool:
        """Whether a target of a source table may also hold rows of other source tables
        (:func:`node.extract.reach.gathered`)."""
        return reach.gathered(self, *self.stored(schema, table))

    def target_databases(self, schema: str) -> list[tuple[str, str]]:
        """(datasource, schema) of every target database a source database's tables go to by
        name (a shard route or a target schema made of the table's name has no one database;
        those are left out)."""
        schema = self.stored_schema(schema)
        found: dict[tuple[str, str], None] = {}
        for entry in self.pairs:
            source, target = entry.pair.source, entry.pair.target
            if entry.route is not None or entry.routes_for_others or \
                    not source.namespace.matches_schema(schema) or \
                    "{table}" in target.namespace.text:
                continue
            name = entry.target_name(source.namespace, target.namespace, schema, (schema, ""))
            found[(target.datasource, name)] = None
        return list(found)

    def __getstate__(self) -> dict[str, Any]:  # the cache is rebuilt on each Spark worker
        return {"pipeline_id": self.pipeline_id, "version": self.version, "pairs": self.pairs,
                "table_keys": self.table_keys, "keys_read_at": self.keys_read_at,
                "ddl_sync": self.ddl_sync,
                "two_way": self.two_way, "before_images": self.before_images,
                "source": self.source, "rules": self.rules, "fold_names": self.fold_names,
                "blind_names": self.blind_names, "target_cases": self.target_cases,
                "follows_columns": self.follows_columns}

    @property
    def broadcast_key(self) -> tuple[str, int, int]:
        """Changes with the definition version and with the table keys read at start."""
        return self.pipeline_id, self.version, hash(frozenset(self.table_keys.items()))

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_plain", {})
        object.__setattr__(self, "_layouts", {})
        object.__setattr__(self, "_written", {})
        object.__setattr__(self, "_made", {})

    def rekey(self, fresh: dict[tuple[str, str], tuple[str, ...]],
              names: dict[tuple[str, str], tuple[str, str]] | None = None,
              read_at: BinlogPosition | None = None) -> None:
        """The unique keys of the tables without a primary key, read again after a DDL, put
        in place (the planner, the door and the copies hold this object), and the mappings
        worked out by the old ones forgotten: a batch run in the node merged by a key the
        table no longer has (two rows of one old key taken for one). ``names``: the
        :attr:`blind_names` read again (a table created or renamed); ``read_at``: the
        source's binlog end read just after them (:attr:`keys_read_at`)."""
        if names is not None and self.blind_names is not None and names != self.blind_names:
            self.blind_names.update(names)  # (never empty to the reader's thread meanwhile)
            for gone in set(self.blind_names) - set(names):
                del self.blind_names[gone]
        if fresh != self.table_keys:
            self.table_keys.clear()
            self.table_keys.update(fresh)
            self._plain.clear()
        object.__setattr__(self, "keys_read_at", read_at)

    def where_made(self, entry: CompiledPair, schema: str, table: str,
                   address: tuple[str, str, str], keys: tuple[str, ...]) -> bool:
        """Whether a ``merge_part`` pair's writes of a table into ``address`` go only where
        the wide row is (:func:`node.extract.joins.where_made`)."""
        found = self._made.get((id(entry), address, keys))
        if found is None:
            target_keys = tuple(entry.renames.get(key, key) for key in keys)
            found = self._made[(id(entry), address, keys)] = where_made(
                entry, f"{schema}.{table}", keys, target_keys, reach.writers(self, address))
        return found

    def plain(self, schema: str, table: str, keys: tuple[str, ...]
              ) -> tuple[PlainMapping, ...] | None:
        """How a table's changes map through its pairs when every pair is :attr:`simple`
        (worked out once per table and key); None when one is not."""
        found = self._plain.get((schema, table, keys), False)
        if found is not False:
            return found  # type: ignore[return-value]
        entries = self.pairs_for(schema, table)
        made: tuple[PlainMapping, ...] | None = None
        if all(entry.simple for entry in entries):
            source_keys = keys or self.table_keys.get((schema, table), ())
            made = tuple(PlainMapping.of(entry, schema, table, source_keys) for entry in entries)
        self._plain[(schema, table, keys)] = made
        return made


def transform(compiled: CompiledPipeline, seq: int, change: RowChange,
              joined: Joined | None = None) -> Iterator[TargetChange]:
    """One source row change as target changes, one per matching pair (a processor may make
    several or none of it); ``joined`` holds the rows the pairs' joins looked up."""
    for entry in compiled.pairs_for(change.schema, change.table):
        processor = entry.pair.processor
        if processor is None:
            yield from map_change(compiled, entry, seq, change, joined=joined)
            continue
        for changed in run_processor(processor, change, entry.where):
            yield from map_change(compiled, entry, seq, changed, named_by=change,
                                  joined=joined)


def _transformed(compiled: CompiledPipeline, plain: list[tuple[int, RowChange]],
                 joined: Joined) -> list[TargetChange]:
    """Every change through its pairs: simple pairs by a mapping worked out once per table,
    the others through :func:`transform`."""
    out: list[TargetChange] = []
    append, plans = out.append, compiled.plain
    two_way = compiled.two_way or compiled.before_images  # before images wanted
    for seq, change in plain:
        found = plans(change.schema, change.table, change.keys)
        if found is None:
            out.extend(transform(compiled, seq, change, joined))
            continue
        for mapping in found:
            append(mapping.changes(seq, change, two_way))
    return out


def extract_transform(compiled: CompiledPipeline, numbered: Iterable[tuple[int, RowChange]]
                      ) -> Iterator[TargetChange]:
    """The per-partition function: numbered source changes in, target changes out."""
    yield from extract_transform_lists(compiled, numbered)


def extract_transform_lists(compiled: CompiledPipeline,
                            numbered: Iterable[tuple[int, RowChange]]) -> list[TargetChange]:
    """The target changes of numbered source changes. Lookups (joins, column groups) use
    one connection per partition, keys batched per table; a step no pair uses costs
    nothing."""
    plain, out = [], []
    for item in numbered:
        change = item[1]
        if change.type is ChangeType.DDL:
            out += extract_ddl(compiled, item[0], change)  # none without ddl_sync, or a pause
        else:
            plain.append(item)
    joined = look_up_joins(compiled.source, [
        (change, entry.pair.joins) for _, change in plain
        for entry in compiled.pairs_for(change.schema, change.table) if entry.pair.joins]) \
        if any(entry.pair.joins for entry in compiled.pairs) else {}
    mapped = _transformed(compiled, plain, joined)
    if any(entry.pair.column_groups for entry in compiled.pairs):
        mapped = fill_holes(compiled.source, mapped)  # column-group columns to look up
    out += mapped
    return out
