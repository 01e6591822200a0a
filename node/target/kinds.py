"""The load side of each kind of target, chosen by the target's ``type`` (its source
definition's): MySQL and MariaDB are one kind."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kazoo.client import KazooClient

from node.target.base import TargetLoader, TargetTables
from node.target.delta.loader import LakeLoader
from node.target.delta.tables import (
    CHANGELOG,
    LakeTables,
    refuse_cascades,
    refuse_partial_rows,
    refuse_undecodable,
)
from node.target.mysql.facts import TargetFacts
from node.target.mysql.loader import Loader
from node.target.mysql.namecase import refuse_folded_collisions
from node.target.mysql.twoway import LoopGuard
from node.target.mysql.twowaytables import refuse_non_transactional, refuse_unsafe_tables
from node.target.subscription.loader import SubscriptionLoader
from shared.endpoint import connect
from shared.errors import ConfigError
from shared.model import DataSource, PipelineParams
from shared.patterns import SYSTEM_SCHEMAS
from shared.zk import ZkPaths

# a DataSource's type → its kind of target
KINDS = {"mysql": "mysql", "mariadb": "mysql", "delta": "delta",
         "subscription": "subscription"}


def kind_of(pipeline_id: str, targets: Mapping[str, DataSource]) -> str:
    """The one kind of target a pipeline writes (a pipeline's pairs write one kind)."""
    found = {name: KINDS.get(target.type or "mysql") for name, target in targets.items()}
    unknown = sorted(name for name, kind in found.items() if kind is None)
    if unknown:
        raise ConfigError(f"pipeline {pipeline_id}: target {unknown[0]} has type "
                          f"{targets[unknown[0]].type!r}; setl writes "
                          f"{', '.join(sorted(KINDS))}")
    if len(set(found.values())) > 1:
        raise ConfigError(f"pipeline {pipeline_id} writes targets of different kinds "
                          f"({', '.join(f'{n}: {k}' for n, k in sorted(found.items()))}); "
                          "give each kind its own pipeline")
    return next(iter(found.values()), "mysql")


def loader(kind: str, pipeline_id: str, targets: dict[str, DataSource],
           params: PipelineParams, epoch: int, stop: threading.Event, run: str,
           two_way: tuple[str, bool] | None = None,
           zk: tuple[KazooClient, ZkPaths] | None = None) -> TargetLoader:
    """The load side for one running pipeline; ``two_way``: the channel's name and whether
    this pipeline wins conflicts; ``zk``: where a subscription keeps its position."""
    if kind == "subscription":
        if params.dry_run:
            raise ConfigError(f"pipeline {pipeline_id} feeds a subscription: its reader's "
                              "acknowledgements are its position, so a dry run would move "
                              "it; leave dry_run out of the pipeline")
        if two_way or zk is None:
            raise ConfigError(f"pipeline {pipeline_id}: a two-way channel cannot feed a "
                              "subscription; give it a one-way channel")
        return SubscriptionLoader(pipeline_id, targets, params, epoch, stop, run, *zk)
    if kind == "delta":
        if two_way:
            raise ConfigError(f"pipeline {pipeline_id}: a two-way channel cannot write a "
                              "lake; give the lake a one-way channel")
        return LakeLoader(pipeline_id, targets, params, epoch, stop=stop, run=run)
    loop = LoopGuard(two_way[0], pipeline_id, wins_conflicts=two_way[1]) if two_way else None
    return Loader(pipeline_id, targets, params, epoch, loop, stop=stop, run=run)


_CONFLICT_CHECK = "a two-way channel's conflict check (every row of it taken for changed)"


def check_source(kind: str, compiled: Any, source: DataSource, after_ddl: bool = False,
                 two_way: dict[str, DataSource] | None = None,
                 targets: dict[str, DataSource] | None = None) -> None:
    """What the source and the pairs must not hold for this kind of target (checked at each
    start, and after a DDL where a load would go on silently: a lake's, a subscription's,
    a two-way pipeline's tables);
    ``two_way``: the targets of a two-way pipeline, whose tables must roll back, hold one
    unique key that compares exact values and no trigger; ``targets``: the MySQL targets,
    none of which may fold two source tables into one (:mod:`node.target.mysql.namecase`)."""
    if targets and kind == "mysql":
        refuse_folded_collisions(compiled, source, targets)
    if after_ddl and kind == "mysql":  # a table created or renamed into a folded name
        refuse_folded_collisions(compiled, source)
        if two_way:  # a replicated DDL can make a two-way table unsafe: a second unique
            refuse_unsafe_tables(compiled.pipeline_id, compiled, source, two_way)  # key, a
            refuse_undecodable(compiled, source, _CONFLICT_CHECK)  # trigger, an sjis column
        return  # (a MariaDB UUID column added later stops the load, loudly)
    if two_way and kind == "mysql":
        refuse_non_transactional(compiled.pipeline_id, compiled, source, two_way)
        refuse_unsafe_tables(compiled.pipeline_id, compiled, source, two_way)
    if kind == "delta":
        refuse_partial_rows(compiled)
    if kind in ("delta", "subscription"):
        refuse_cascades(compiled, source, "a lake table" if kind == "delta" else
                        "a subscription's reader")
    if kind in ("delta", "subscription") or two_way:  # (their values are bytes: a reader
        refuse_undecodable(compiled, source, {  # or a conflict check would take them for
            "delta": "the lake table", "subscription": "a subscription's reader"}.get(  # text)
            kind, _CONFLICT_CHECK))
    refuse_stored_types(compiled, source)


# MariaDB's types whose binlog value is the bytes they store, where a SELECT (a copy, verify,
# the free door) gives their text: the two never meet on a target
STORED_TYPES = {"uuid": "CHAR(36)", "inet6": "VARCHAR(39)", "inet4": "VARCHAR(15)"}


def refuse_stored_types(compiled: Any, source: DataSource) -> None:
    """Refuse a pair that copies a MariaDB UUID, INET6 or INET4 column: its rows would stop
    the load (a UUID's bytes are no UUID's text) or, in a lake, hold bytes where a copy
    wrote text."""
    with connect(source) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")
        schemas = [str(row[0]) for row in cursor.fetchall()
                   if str(row[0]) not in SYSTEM_SCHEMAS and compiled.wants_schema(str(row[0]))]
        if not schemas:  # (the columns of the schemas the pipeline reads only: a server's
            return  # information_schema.COLUMNS can be slow to read whole)
        cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE FROM "
                       "information_schema.COLUMNS WHERE DATA_TYPE IN "
                       f"({', '.join(['%s'] * len(STORED_TYPES))}) AND TABLE_SCHEMA IN "
                       f"({', '.join(['%s'] * len(schemas))}) ORDER BY 1, 2, "
                       "ORDINAL_POSITION", (*STORED_TYPES, *schemas))
        found = cursor.fetchall()
    for schema, table, column, data_type in found:
        keys = compiled.configured_keys(schema, table)  # a key is copied, excluded or not
        for entry in compiled.pairs_for(schema, table):
            if entry.keeps(column, keys):
                kind = str(data_type).upper()
                raise ConfigError(
                    f"{entry.where}: column {column} of {schema}.{table} is MariaDB's {kind}, "
                    "which setl does not replicate yet: the binlog carries the bytes it "
                    "stores, a copy its text, and the two would not meet on the target. "
                    f"Leave the column out of the pair (columns: {{exclude: [{column}]}}), or "
                    f"change it on the source (ALTER TABLE … MODIFY {column} "
                    f"{STORED_TYPES[str(data_type).lower()]}), then start the channel again")


def tables(kind: str, targets: dict[str, DataSource], compiled: Any = None) -> TargetTables:
    """What a kind of target's rendering needs to know of its tables; a lake's come from
    the pairs of ``compiled`` (the pipeline's CompiledPipeline) and the source's table maps."""
    if kind == "delta":
        return LakeTables(compiled)
    if kind == "subscription":  # the columns' types, as a lake's; any table, keyed or not
        return LakeTables(compiled, mode=CHANGELOG)
    return TargetFacts(targets)
