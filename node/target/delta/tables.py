"""What the workers need to know of a lake table: its columns with their Delta types, the
key its rows are merged by, its mode and partitions (:class:`LakeFacts`), worked out in the
node from the source's table map and the pair, and shipped with each job."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from node import charsets
from node.target.delta.columns import META_PREFIX, LakeColumn, TextColumn, table_columns
from shared.endpoint import connect
from shared.errors import ConfigError
from shared.pairchecks import lake_pair_problems
from shared.patterns import PatternKind
from shared.tablekeys import lake_key_problem

Target = tuple[str, str, str]  # datasource, schema, table
MIRROR, CHANGELOG = "mirror", "changelog"


@dataclass(frozen=True)
class LakeFacts:
    columns: tuple[LakeColumn, ...] = ()
    keys: tuple[str, ...] = ()  # the target columns rows are merged by (mirror)
    mode: str = MIRROR
    partition_by: tuple[str, ...] = ()
    foreign_keys: bool = False  # (what the planner asks of every kind of target)

    def ordered(self, keys: tuple[str, ...]) -> bool:
        return False


class LakeTables:
    """The lake facts of a pipeline's target tables, from the pairs of ``compiled`` (a
    :class:`node.extract.etl.CompiledPipeline`, used by its attributes only: a target never
    imports Extract)."""

    def __init__(self, compiled: Any, mode: str = MIRROR) -> None:
        self.compiled = compiled
        self.mode = mode  # a pair's mode when it gives none
        self._known: dict[Target, LakeFacts] = {}
        self._from: dict[Target, set[tuple[str, str]]] = {}  # the source tables seen
        self._lock = threading.Lock()

    def of(self, target: Target, layout: Any = None) -> LakeFacts:
        """The facts of a target table, from ``layout`` (a source table's table map) or,
        where none came with the batch (a snapshot's read of a table not written since the
        node started), from the source's information_schema."""
        found = self._known.get(target)
        if found is not None:
            if layout is not None and found.mode == MIRROR and \
                    (layout.schema, layout.table) not in self._from[target]:
                found = self._alike(target, layout, found)
            return found
        if layout is None:
            layout = self._described(target)
            if layout is None:
                return LakeFacts()
        with self._lock:
            facts = self._facts(target, layout)
            self._from[target] = {(layout.schema, layout.table)}
            self._known[target] = facts  # (known once where it came from is)
        return facts

    def _alike(self, target: Target, layout: Any, facts: LakeFacts) -> LakeFacts:
        """Another source table into a mirrored lake table: a row is written whole, so the
        rows of tables of different pairs (parts of a wide row) must have the table's
        columns, or they would write NULL into the columns only the others have. Tables of
        one pair's family (shards; one ALTERed before the others) write theirs: a column
        a shard lacks is not there for its rows, and the table's columns are the union."""
        theirs = self._facts(target, layout)
        other = {column.name: column for column in theirs.columns}
        held = {column.name: column for column in facts.columns}
        first_seen = sorted(self._from[target])[0]
        if other.keys() != held.keys() and self._one_pair(first_seen, layout) and all(
                _typed(other[name]) == _typed(held[name])
                for name in other.keys() & held.keys()):
            facts = dataclasses.replace(facts, columns=facts.columns + tuple(
                column for column in theirs.columns if column.name not in held))
            with self._lock:
                self._known[target] = facts
                self._from[target].add((layout.schema, layout.table))
            return facts
        if other.keys() != held.keys():
            first = "{}.{}".format(*first_seen)
            apart = sorted(other.keys() ^ held.keys())
            raise ConfigError(
                f"pipeline {self.compiled.pipeline_id}: lake table {target[1]}.{target[2]} "
                f"gets the rows of {first} and of {layout.schema}.{layout.table}, whose "
                f"columns differ ({', '.join(apart[:5])}): a mirrored lake row is written "
                "whole, so the rows of one would write NULL into the columns only the other "
                "has. Give each source table its own lake table (joined when read), give "
                "them the same columns, or write the wide table into a database target")
        with self._lock:
            self._from[target].add((layout.schema, layout.table))
        return facts

    def _one_pair(self, seen: tuple[str, str], layout: Any) -> bool:
        """Whether one pair takes both source tables (a family: shards)."""
        ours = self.compiled.pairs_for(*seen)
        return bool(ours) and [id(entry) for entry in ours] == [
            id(entry) for entry in self.compiled.pairs_for(layout.schema, layout.table)]

    def _described(self, target: Target) -> Any:
        """The source table that the pipeline's pairs write to ``target``, as the source's
        information_schema describes it (None: no such table, or no source to ask)."""
        source = getattr(self.compiled, "source", None)
        if source is None:
            return None
        with connect(source) as conn, conn.cursor() as cursor:
            for entry in self.compiled.pairs:
                media = entry.pair.source
                single = media.namespace.kind is PatternKind.SINGLE
                cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                               "WHERE TABLE_TYPE = 'BASE TABLE'" + (
                                   " AND TABLE_SCHEMA = %s" if single else ""),
                               (media.namespace.literal,) if single else ())
                for schema, table in cursor.fetchall():
                    if media.namespace.matches_schema(schema) and media.table.matches(table) and \
                            entry.address(schema, table) == target:
                        return _layout(cursor, schema, table)
        return None

    def forget(self) -> None:
        with self._lock:
            self._known.clear()
            self._from.clear()

    def close(self) -> None:
        pass

    def _facts(self, target: Target, layout: Any) -> LakeFacts:
        where = f"{layout.schema}.{layout.table} → {target[1]}.{target[2]}"
        entry = next((entry for entry in self.compiled.pairs_for(layout.schema, layout.table)
                      if entry.address(layout.schema, layout.table) == target or
                      entry.route is not None), None)
        if entry is None:
            return LakeFacts()
        pair = entry.pair
        # as Transform keys its changes: a table without a key of its own stays keyless
        # whatever key_columns says (they speed a database target's matches up, and need
        # not be unique)
        own = layout.primary_key or self.compiled.table_keys.get((layout.schema, layout.table),
                                                                 ())
        keyless = not own and not (pair.joins or pair.merge_part)
        source_keys = () if keyless else (pair.key_columns or own)
        mode = pair.mode or self.mode
        if mode == MIRROR and pair.key_columns:  # (refused at start already: a table made
            problem = lake_key_problem(pair.key_columns, own or None)  # since, or its key)
            if problem:
                raise ConfigError(f"{entry.where}: {where} {problem}")

        def map_name(name: str) -> str | None:
            if not entry.keeps(name, source_keys):
                return None
            return entry.renames.get(name, name)

        columns = table_columns(layout, map_name)
        raw = next((column for column in layout.columns if map_name(column.name) is not None
                    and not charsets.decodable(column.charset)), None)
        if raw is not None:
            raise ConfigError(undecodable(entry.where, layout.schema, layout.table,
                                          raw.name, raw.charset))
        named = {column.name for column in columns}
        extra = [filler.name for filler in entry.fillers] + \
            [column for join in pair.joins for column in join.columns]
        columns += [LakeColumn(name, "string") for name in extra if name not in named]
        clash = [column.name for column in columns if column.name.startswith(META_PREFIX)]
        if clash:
            raise ConfigError(f"{entry.where}: column {clash[0]} of {where} starts with "
                              f"{META_PREFIX!r}, which a lake table keeps for setl's own "
                              "columns; rename it with column_pairs")
        keys = tuple(entry.renames.get(key, key) for key in source_keys)
        if mode == MIRROR and not keys:
            raise ConfigError(
                f"{entry.where}: {where} has no primary key nor a unique key over NOT NULL "
                "columns, and a mirrored lake table merges rows by key (a Delta MERGE cannot "
                "remove one of two equal rows; key_columns need not be unique); give the pair "
                "'mode: changelog' (every change appended)")
        ticked = [column.name for column in columns if "`" in column.name]
        if mode == MIRROR and ticked:
            raise ConfigError(
                f"{entry.where}: column {ticked[0]!r} of {where} holds a backtick, which "
                "delta-rs cannot name in the MERGE a mirrored lake table is written with; "
                "rename it with column_pairs, or give the pair 'mode: changelog'")
        missing = [name for name in pair.partition_by if name not in
                   {column.name for column in columns}]
        if missing:
            raise ConfigError(f"{entry.where}: partition_by names {missing[0]}, which "
                              f"{target[1]}.{target[2]} does not have")
        return LakeFacts(tuple(columns), keys, mode, tuple(pair.partition_by))


def _layout(cursor: Any, schema: str, table: str) -> Any:
    cursor.execute("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME FROM "
                   "information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                   "ORDER BY ORDINAL_POSITION", (schema, table))
    columns = tuple(TextColumn(str(name), str(kind), str(full), charset)
                    for name, kind, full, charset in cursor.fetchall())
    cursor.execute("SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE "
                   "TABLE_SCHEMA = %s AND TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY' "
                   "ORDER BY SEQ_IN_INDEX", (schema, table))
    keys = tuple(str(row[0]) for row in cursor.fetchall())
    return SimpleNamespace(schema=schema, table=table, columns=columns, primary_key=keys)


def refuse_partial_rows(compiled: Any) -> None:
    """Refuse a lake pair whose rows would carry only some of their columns (column_groups,
    merge_part: :func:`shared.pairchecks.lake_pair_problems`): ``setl apply`` refuses them
    already; a definition written straight into ZooKeeper meets this at start."""
    for entry in compiled.pairs:
        for key, problem in lake_pair_problems(entry.pair, entry.pair.target.datasource):
            raise ConfigError(f"{entry.where}: {key}: {problem}")


CASCADES = ("SELECT k.CONSTRAINT_SCHEMA, k.TABLE_NAME, k.REFERENCED_TABLE_SCHEMA, "
            "k.REFERENCED_TABLE_NAME, r.DELETE_RULE, r.UPDATE_RULE, k.CONSTRAINT_NAME "
            "FROM information_schema.REFERENTIAL_CONSTRAINTS r JOIN "
            "information_schema.KEY_COLUMN_USAGE k ON k.CONSTRAINT_SCHEMA = "
            "r.CONSTRAINT_SCHEMA AND k.CONSTRAINT_NAME = r.CONSTRAINT_NAME AND k.TABLE_NAME = "
            "r.TABLE_NAME WHERE k.REFERENCED_TABLE_NAME IS NOT NULL AND (r.DELETE_RULE <> "
            "'RESTRICT' AND r.DELETE_RULE <> 'NO ACTION' OR r.UPDATE_RULE <> 'RESTRICT' AND "
            "r.UPDATE_RULE <> 'NO ACTION')")


def refuse_cascades(compiled: Any, source: Any, what: str = "a lake table") -> None:
    """Refuse a pipeline into a lake (or a subscription) that replicates both ends of a
    cascading foreign key: the rows a cascade changes are not in the binlog, and ``what``
    has no foreign key to redo it, so it would keep rows the source no longer has."""
    with connect(source) as conn, conn.cursor() as cursor:
        cursor.execute(CASCADES)
        found = cursor.fetchall()
    for schema, child, parent_schema, parent, on_delete, on_update, name in found:
        if compiled.pairs_for(schema, child) and compiled.pairs_for(parent_schema, parent):
            rule = f"ON DELETE {on_delete}" if on_delete not in ("RESTRICT", "NO ACTION") \
                else f"ON UPDATE {on_update}"
            raise ConfigError(
                f"pipeline {compiled.pipeline_id}: {schema}.{child} has foreign key {name} to "
                f"{parent_schema}.{parent} with {rule}; the rows the cascade changes are not "
                f"in the binlog and {what} cannot redo it, so it would keep rows "
                f"the source no longer has. Leave one of the two tables out of the pipeline, "
                "replicate them into a database target, or make the key ON DELETE/ON UPDATE "
                "RESTRICT on the source")


SYSTEM = "('mysql', 'information_schema', 'performance_schema', 'sys', 'retl')"


def refuse_undecodable(compiled: Any, source: Any, reader: str = "the lake table") -> None:
    """Refuse a pipeline into a lake (or to ``reader``: a subscription's, a two-way
    channel's conflict check) that copies a text column of a charset setl does not decode
    exactly (:func:`node.charsets.decodable`): its values, bytes, would reach the lake taken
    for UTF-8 (swe7's 'KÄra' as 'K[ra'), or stop the batch."""
    with connect(source) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT CHARACTER_SET_NAME FROM information_schema.CHARACTER_SETS")
        names = [str(row[0]) for row in cursor.fetchall()
                 if not charsets.decodable(str(row[0]))]
        if not names:
            return
        cursor.execute("SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, "
                       "c.CHARACTER_SET_NAME FROM information_schema.COLUMNS c JOIN "
                       "information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND "
                       "t.TABLE_NAME = c.TABLE_NAME AND t.TABLE_TYPE = 'BASE TABLE' WHERE "
                       f"c.CHARACTER_SET_NAME IN ({', '.join(['%s'] * len(names))}) AND "
                       f"c.TABLE_SCHEMA NOT IN {SYSTEM} ORDER BY 1, 2, c.ORDINAL_POSITION",
                       names)
        found = cursor.fetchall()
    for schema, table, column, charset in found:
        for entry in compiled.pairs_for(schema, table):
            if entry.keeps(column):
                raise ConfigError(undecodable(entry.where, schema, table, column, charset,
                                              reader))


def undecodable(where: str, schema: str, table: str, column: str, charset: str,
                reader: str = "the lake table") -> str:
    return (f"{where}: column {column} of {schema}.{table} is text in {charset}, a charset "
            f"setl cannot decode exactly (node.charsets): it would reach {reader} as its "
            "bytes taken for UTF-8. Leave the column out of the pair (columns: {exclude: "
            f"[{column}]}}), or convert it on the source (ALTER TABLE … MODIFY {column} … "
            "CHARACTER SET utf8mb4), then start the channel again")


def _typed(column: LakeColumn) -> LakeColumn:
    """A column as its lake type says it (a SET's members aside: one shard's described by
    its table map may not carry them, another's by the schema does; and a DATETIME's or
    TIMESTAMP's fractional digits: one Arrow type holds them all)."""
    moment = column.kind in ("datetime", "timestamp")
    return column._replace(members=(), scale=0 if moment else column.scale)
