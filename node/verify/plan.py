"""What ``setl verify`` checks of a pipeline: each source table its pairs take, the target
tables its rows go to (every shard slot), which columns compare, and how.

A table is **not verified** (and the report says why) when nothing keys its rows, or when
every pair that takes it has a processor (its output is not a function of the row alone)
and no ``--columns`` names what to compare. A pair with a processor beside verified ones is
left out with a note; virtual columns filled by a processor are not compared. A target
table that does not exist is a difference (:class:`Absent`: every source row is missing
there), not a table left out.

A keyless table is compared by its pair's ``key_columns``, which need not be unique: a key
may have several rows on either side, compared as a multiset (``TablePlan.unique`` false:
:mod:`node.verify.readers`).

Two methods:

- ``sql``: every pair only renames and chooses columns (no virtual columns, processor,
  shard route, join, column group), each compared column has the same type on both sides,
  and each target table holds this table's rows alone. The databases hash the rows
  (:func:`node.verify.values.sql_hash`); Python sees chunk checksums, and keys with hashes
  only where a chunk differs.
- ``rows``: everything else. Rows are read, go through the pipeline's Extract/Transform as
  their binlog images would, and are hashed in Python against the target's rows.

Rows on the target that no source row gives (**extra**) are looked for in each chunk's
key range where the target table is fed by this source table alone and has the split
column; elsewhere (tables merged into one target, wide rows, a key written by a virtual
column) only keys the source gives are compared, and the report says so. Where a virtual
column writes a key column (``id + 1000000``, to keep gathered tables' keys apart), a
source row's target row is the one at the key its transformed image writes
(:mod:`node.verify.readers`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from node.extract.chunks import SplitKey, table_key
from node.extract.etl import CompiledPipeline
from node.extract.pairs import CompiledPair
from node.target.delta.columns import LakeColumn
from node.verify.values import Column, hash_function, read_columns, select_list
from shared.datatypes import read_as_bytes
from shared.errors import ConfigError
from shared.identifiers import quote, short_form, split_qualified, unquote
from shared.model import MediaPair
from shared.patterns import SYSTEM_SCHEMAS, NamePattern, PatternKind
from shared.tablekeys import row_keys

SYSTEM = SYSTEM_SCHEMAS


@dataclass(frozen=True)
class Skipped:
    table: str
    reason: str


@dataclass(frozen=True)
class Absent:
    """A source table one of whose target tables does not exist: every row of it (under
    ``--where``) is missing there."""

    key: SplitKey
    target: str  # datasource:schema.table
    where: str = ""

    @property
    def name(self) -> str:
        return short_form(self.key.schema, self.key.table)


@dataclass(frozen=True)
class Target:
    """One target table a verified source table is written to."""

    datasource: str
    schema: str
    table: str
    keys: tuple[str, ...]  # the source key, renamed
    columns: tuple[Column, ...]  # its non-generated columns, read in this order
    compared: frozenset[str]  # the target columns that are compared
    range_column: str | None  # the split column's name here; None: read by key only
    # why rows that no source row gives are not looked for here ("": they are, in each
    # chunk's key range)
    blind: str
    source_hashed: tuple[str, ...] = ()  # sql method: source columns hashed, in order
    target_hashed: tuple[str, ...] = ()  # sql method: the same columns as named here
    hashed_nullable: tuple[bool, ...] = ()  # sql method: which admit NULL on either side
    hashed_kinds: tuple[str, ...] = ()  # sql method: how each compares (Column.kind)
    lake: tuple[LakeColumn, ...] = ()  # a lake table: its columns as Load types them
    # a virtual column writes a key column here (``id + 1000000``): its rows are found by
    # the key each transformed row writes, not by the source's (and never by its range)
    key_written: bool = False

    @property
    def extras(self) -> bool:
        return not self.blind

    @property
    def id(self) -> str:
        return f"{self.datasource}:{short_form(self.schema, self.table)}"

    @property
    def kinds(self) -> dict[str, str]:
        return {column.name: column.kind for column in self.columns}

    @property
    def read_list(self) -> str:
        return select_list(self.columns)


@dataclass(frozen=True)
class TablePlan:
    """A source table to verify."""

    pipeline_id: str
    key: SplitKey
    method: str  # sql | rows
    targets: tuple[Target, ...]
    columns: tuple[Column, ...]  # the source table's, read in this order
    where: str = ""
    notes: tuple[str, ...] = ()
    datasources: tuple[str, ...] = field(default=())
    hash: str = "crc"  # sql method: crc or md5 (node.verify.values.sql_hash)
    unique: bool = True  # the key is the table's own (False: key_columns of a keyless table,
    # or ones that leave out part of its key: a key may have several rows)

    @property
    def name(self) -> str:
        return short_form(self.key.schema, self.key.table)

    @property
    def read_list(self) -> str:
        return select_list(self.columns)


@dataclass(frozen=True)
class Request:
    """What the user asked for."""

    table: str = ""  # schema.table; empty: every table the pipeline's pairs take
    where: str = ""
    columns: tuple[str, ...] = ()  # source column names; lets processor pairs be compared
    compare: str = "auto"  # auto | rows
    # datasource:schema.table that other pipelines write too (the manager says which)
    shared_targets: frozenset[str] = frozenset()
    # other pipelines' pairs into the same target data sources (their sources' data source
    # set): a table one may write from another source table is shared (written_by_others)
    other_pairs: tuple[MediaPair, ...] = ()


def source_tables(cursor: Any, compiled: CompiledPipeline) -> list[tuple[str, str]]:
    """The source's base tables some pair of the pipeline takes."""
    marks = ", ".join(["%s"] * len(SYSTEM))
    cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE "
                   f"TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ({marks}) "
                   "ORDER BY TABLE_SCHEMA, TABLE_NAME", SYSTEM)
    return [(schema, table) for schema, table in cursor.fetchall()
            if compiled.wants(schema, table)]


class Lakes(Protocol):
    """The pipeline's lake targets (:class:`node.verify.lake.LakePlanner`)."""

    def __contains__(self, datasource: object) -> bool: ...

    def describe(self, address: tuple[str, str, str]
                 ) -> tuple[list[Column], tuple[LakeColumn, ...]] | str | None: ...


def plan(compiled: CompiledPipeline, cursor: Any, target_cursor: Callable[[str], Any],
         request: Request, lakes: Lakes | None = None
         ) -> tuple[list[TablePlan | Absent], list[Skipped]]:
    """The tables to verify (or whose target table is missing) and those left out (with
    why); ``target_cursor(datasource)`` gives a cursor on a database target, ``lakes``
    describes the lake ones (None: the lake table does not exist)."""
    tables = source_tables(cursor, compiled)
    feeders = Counter(target for schema, table in tables
                      for target in compiled.targets_of(schema, table))
    if request.table:
        try:
            wanted = tuple(map(unquote, split_qualified(request.table)))
        except ConfigError:
            raise ConfigError("give --table as schema.table (a name that holds a dot in "
                              "backticks: `my-db`.`t.1`)") from None
        if wanted not in tables:
            raise ConfigError(f"pipeline {compiled.pipeline_id} does not replicate "
                              f"{request.table} (no pair takes it, or it is not a table on "
                              "the source); check --table and --pipeline")
        tables = [wanted]
    plans: list[TablePlan | Absent] = []
    skipped: list[Skipped] = []
    for schema, table in tables:
        made = _plan_table(compiled, cursor, target_cursor, request, schema, table, feeders,
                           lakes)
        if isinstance(made, Skipped):
            skipped.append(made)
        else:
            plans.append(made)
    by_sql = {name for p in plans if isinstance(p, TablePlan) and p.method == "sql"
              for name in p.datasources}
    if by_sql:
        function = hash_function([cursor, *(target_cursor(name) for name in sorted(by_sql))])
        plans = [dataclasses.replace(p, hash=function)
                 if isinstance(p, TablePlan) and p.method == "sql" else p for p in plans]
    return plans, skipped


def written_by_others(pairs: tuple[MediaPair, ...], address: tuple[str, str, str],
                      source: tuple[str, str, str]) -> bool:
    """Whether one of other pipelines' ``pairs`` may write target table ``address`` from
    another source table than ``source`` (data source, schema, table): then rows there that
    ``source`` does not give are that pipeline's, never extra (--repair would delete them).
    In doubt — a pattern whose source table cannot be told from the target's name — it may."""
    for pair in pairs:
        target = pair.target
        if target.datasource != address[0]:
            continue
        fits = [_fits(target.namespace, address[1], "schema"),
                _fits(target.table, address[2], "table")]
        if any(found is None for found in fits):
            continue  # it never writes this table
        if _source_of(pair, fits) != source:
            return True
    return False


def _fits(pattern: NamePattern, name: str, part: str) -> dict[str, str] | None:
    """How a target name pattern writes ``name``: None when it never does; else what it
    tells of the source's names (a template's fields; a family's member index as
    ``{part}#``)."""
    if pattern.kind is PatternKind.TEMPLATE:
        found = pattern.sources_of(name)
        return None if not found else found[0] if len(found) == 1 else {}
    if pattern.kind is PatternKind.MULTI:
        index = pattern.index_of(name)
        return None if index is None else {f"{part}#": str(index)}
    return {} if pattern.matches(name) else None


def _source_of(pair: MediaPair, fits: list[dict[str, str] | None]) -> tuple[str, str, str] | None:
    """The source table a pair writes the fitted target from, where one only; else None."""
    told: dict[str, str] = {}
    for found in fits:
        told.update(found or {})
    names = []
    for pattern, part in ((pair.source.namespace, "schema"), (pair.source.table, "table")):
        if pattern.kind is PatternKind.SINGLE:
            names.append(pattern.literal)
        elif pattern.kind is PatternKind.MULTI and f"{part}#" in told:
            names.append(pattern.name_at(int(told[f"{part}#"])))
        elif part in told:  # a template's field: the source's own name
            names.append(told[part])
        else:
            return None
    return pair.source.datasource, names[0], names[1]


def _plan_table(compiled: CompiledPipeline, cursor: Any, target_cursor: Callable[[str], Any],
                request: Request, schema: str, table: str, feeders: Counter,
                lakes: Lakes | None) -> TablePlan | Absent | Skipped:
    from node.verify.lake import blind as lake_blind  # (it reads this module's Target)

    name = short_form(schema, table)
    key = table_key(cursor, schema, table, compiled.configured_keys(schema, table))
    if key is None:
        return Skipped(name, "no primary key, no unique key over NOT NULL columns and no "
                             "key_columns on its pair: its rows cannot be told apart by key "
                             "(give the pair key_columns to verify it)")
    entries = compiled.pairs_for(schema, table)
    kept = [e for e in entries if not e.pair.processor or request.columns]
    notes = [f"pair {e.pair.source} → {e.pair.target} not compared: its processor "
             f"{e.pair.processor} may make anything of a row; give --columns to compare "
             "chosen columns" for e in entries if e not in kept]
    if not kept:
        return Skipped(name, notes[0].replace(" not compared:", ":"))
    source_columns = read_columns(cursor, schema, table)
    nullable = [c.name for c in source_columns if c.nullable and c.name in key.columns]
    if nullable:  # WHERE (k) IN ((NULL)) finds no row on either side: a difference hides
        return Skipped(name, f"its key_columns {', '.join(nullable)} admit NULL: a row with "
                             "NULL there cannot be found by its key, on either side; give "
                             "the pair key_columns over NOT NULL columns to verify it")
    missing = [c for c in request.columns if c not in {col.name for col in source_columns}]
    if missing:
        raise ConfigError(f"--columns: {', '.join(missing)} not in {name} on the source")
    targets: list[Target] = []
    for entry in kept:
        for address in (entry.route.slots if entry.route is not None
                        else [entry.address(schema, table)]):
            lake: tuple[LakeColumn, ...] = ()
            if lakes is not None and address[0] in lakes:
                described = lakes.describe(address)
                if isinstance(described, str):
                    return Skipped(name, described)
                columns, lake = described or ([], ())
            else:
                columns = [c for c in read_columns(target_cursor(address[0]), *address[1:])
                           if not c.generated]
            if not columns:  # every row is missing there: a difference, not a skip
                return Absent(key, f"{address[0]}:{short_form(*address[1:])}", request.where)
            if not lake and (held := null_keys(target_cursor(address[0]), address, columns,
                                               [entry.renames.get(k, k) for k in key.columns])):
                return Skipped(name, held)
            made = _target(entry, address, key, columns, source_columns, request,
                           alone=feeders[address] == 1 and not compiled.gathered(schema, table)
                           and f"{address[0]}:{address[1]}.{address[2]}" not in
                           request.shared_targets and not written_by_others(
                               request.other_pairs, address,
                               (entry.pair.source.datasource, schema, table)))
            converted = [c.name for c in made.columns if c.converted and c.name in made.keys]
            if converted:  # looked up by the source's bytes, it finds no row there
                return Skipped(name, f"its key column(s) {', '.join(converted)} hold text "
                                     f"{address[0]}:{short_form(*address[1:])} keeps in "
                                     "another charset than the source's: verify finds rows "
                                     "by key and cannot yet look such keys up there; compare "
                                     "this table by hand")
            if lake:  # compared as the lake holds it, by the rows method
                made = dataclasses.replace(made, lake=lake)
                made = dataclasses.replace(made, blind=made.blind or lake_blind(made))
            targets.append(made)
    method = "sql" if request.compare != "rows" and not any(t.lake for t in targets) and all(
        entry.simple for entry in kept) and all(t.source_hashed for t in targets) else "rows"
    if method == "rows":
        targets = [dataclasses.replace(t, source_hashed=(), target_hashed=(), hashed_nullable=(),
                                       hashed_kinds=())
                   for t in targets]
    notes += [f"rows on {t.id} that no row of {name} gives are not looked for: {t.blind}"
              for t in targets if t.blind]
    own = row_keys(cursor, (schema, table)).get((schema, table))
    unique = own is not None and {c.lower() for c in own} <= {c.lower() for c in key.columns}
    return TablePlan(compiled.pipeline_id, key, method, tuple(targets), tuple(source_columns),
                     request.where, tuple(notes),
                     tuple(dict.fromkeys(t.datasource for t in targets)), unique=unique)


def null_keys(cursor: Any, address: tuple[str, str, str], columns: list[Column],
              keys: list[str]) -> str:
    """Why a target table whose key columns admit NULL cannot be compared, when it holds
    rows with NULL there ('' when it holds none, or they admit none): no chunk's key range
    holds such a row, and no lookup by key finds it, so an extra row would never be seen."""
    nullable = [c.name for c in columns if c.nullable and c.name in keys]
    if not nullable:
        return ""
    where = " OR ".join(f"{quote(name)} IS NULL" for name in nullable)
    cursor.execute(f"SELECT COUNT(*) FROM {quote(address[1])}.{quote(address[2])} "
                   f"WHERE {where}")
    found = int(cursor.fetchone()[0])
    if not found:
        return ""
    return (f"{address[0]}:{short_form(*address[1:])} holds {found} row(s) with NULL in key "
            f"column(s) {', '.join(nullable)}, which no row of the source gives (its key "
            "admits no NULL) and no key range or lookup finds: delete them on the target (or "
            "make the columns NOT NULL there), then verify again")


def _target(entry: CompiledPair, address: tuple[str, str, str], key: SplitKey,
            columns: list[Column], source_columns: list[Column], request: Request,
            alone: bool) -> Target:
    pair = entry.pair
    present = {column.name: column for column in columns}
    actual = {name.lower(): name for name in present}  # column names ignore case

    def renames_get(name: str, default: str) -> str:  # its name on the target, as it is there
        written = entry.renames.get(name, default)
        return actual.get(written.lower(), written)
    chosen = {renames_get(c, c) for c in request.columns} | \
        {renames_get(k, k) for k in key.columns} if request.columns else set(present)
    by_processor = {actual.get(v.name.lower(), v.name) for v in pair.virtual_columns
                    if v.processor}
    compared = frozenset(name for name in present if name in chosen and name not in by_processor)
    range_column: str | None = renames_get(key.column, key.column)
    if range_column not in present:
        range_column = None
    hashed = [(c.name, renames_get(c.name, c.name)) for c in source_columns
              if _written(entry, c.name, key.columns) and renames_get(c.name, c.name) in compared]
    by_name = {c.name: c for c in source_columns}
    same = all(by_name[s].shape == present[t].shape for s, t in hashed)
    # text the stream keeps as its bytes and the target converts into its own charset: read
    # there converted back into the source's (verify compared sjis bytes with UTF-8 text)
    back = {t: dataclasses.replace(present[t], charset=by_name[s].charset, converted=True,
                                 own_charset=present[t].charset)
            for s, t in hashed if read_as_bytes(by_name[s].data_type, by_name[s].charset)
            and present[t].charset and present[t].charset != by_name[s].charset}
    columns = [back.get(column.name, column) for column in columns]
    target_keys = {renames_get(k, k).lower() for k in key.columns}
    writers = sorted(v.name for v in pair.virtual_columns if v.name.lower() in target_keys)
    blind = (f"it has no column for {key.column}" if range_column is None else
             "it holds wide rows merged from several tables" if pair.joins or pair.merge_part
             else "it is fed by other tables too" if not alone
             else f"its key column(s) {', '.join(writers)} are written by virtual columns, "
                  "so its key range is not the source's (the rows the source gives are "
                  "compared by the key each writes)" if writers else "")
    sql_ready = same and bool(hashed) and not blind and not pair.virtual_columns
    return Target(address[0], address[1], address[2],
                  tuple(renames_get(k, k) for k in key.columns), tuple(columns), compared,
                  range_column, blind,
                  tuple(s for s, _ in hashed) if sql_ready else (),
                  tuple(t for _, t in hashed) if sql_ready else (),
                  tuple(by_name[s].nullable or present[t].nullable for s, t in hashed)
                  if sql_ready else (),
                  tuple(by_name[s].kind for s, _ in hashed) if sql_ready else (),
                  key_written=bool(writers))


def _written(entry: CompiledPair, column: str, keys: tuple[str, ...]) -> bool:
    """Whether the pair writes a source column (keys always go)."""
    return entry.keeps(column, keys)
