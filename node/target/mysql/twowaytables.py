"""Two-way channels: the target tables a two-way pipeline refuses when it starts.

The loop mark and the conflict check (:mod:`node.target.mysql.twoway`) hold for whole rows
of transactional tables whose rows the check tells apart as the write does. Before a
two-way pipeline runs, its source's paired target tables are looked at: an engine that does
not roll back (:func:`refuse_non_transactional`; its rows would reach the binlog without
the loop mark), and a table with a second unique key, ``key_columns`` that are no unique
key, a key that compares loosely, a trigger, or AUTO_INCREMENT numbering alike on both
sides (:func:`refuse_unsafe_tables`, :func:`table_problems`) are refused with what to do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from node.target.mysql.collations import loose_collation
from node.target.mysql.facts import Target
from shared.endpoint import connect
from shared.errors import ConfigError
from shared.identifiers import qualified
from shared.model import DataSource


def engine_problem(pipeline_id: str, target: Target, engine: str) -> str:
    """Why a two-way pipeline cannot write a table of an engine that does not roll back."""
    name = f"{target[1]}.{target[2]}"
    return (f"pipeline {pipeline_id} (two-way): target table {name} on {target[0]} has "
            f"engine {engine or '(unknown)'}, which does not roll back: its rows reach the binlog "
            "as a group of their own, without the loop mark of the load's transaction, so "
            "the opposite pipeline would take them for that server's own writes and send "
            f"them back. Make it InnoDB (ALTER TABLE {qualified(*target[1:])} "
            "ENGINE=InnoDB), or replicate it with a one-way channel, then start the channel "
            "again")


def paired_targets(compiled: Any, source: DataSource, targets: dict[str, DataSource],
                   keyed: dict[tuple[str, str, str], tuple[str, ...]] | None = None
                   ) -> dict[str, list[tuple[str, str]]]:
    """Per target data source: the target tables of the source tables the pipeline pairs;
    ``keyed`` is given each target table's columns a pair's ``key_columns`` name there."""
    with connect(source) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                       "WHERE TABLE_TYPE = 'BASE TABLE'")
        tables = [(str(schema), str(table)) for schema, table in cursor.fetchall()]
    wanted: dict[str, list[tuple[str, str]]] = {}
    for schema, table in tables:
        if compiled.wants_schema(schema) and compiled.wants(schema, table):
            for datasource, name, target in compiled.targets_of(schema, table):
                if datasource in targets:
                    wanted.setdefault(datasource, []).append((name, target))
                    named = _target_key_columns(compiled, schema, table)
                    if keyed is not None and named:
                        keyed[(datasource, name, target)] = named
    return dict(sorted(wanted.items()))


def refuse_non_transactional(pipeline_id: str, compiled: Any, source: DataSource,
                             targets: dict[str, DataSource]) -> None:
    """At the start of a two-way pipeline: refuse if a target table of a source table it
    replicates has an engine that does not roll back (:func:`engine_problem`)."""
    for datasource, names in paired_targets(compiled, source, targets).items():
        with connect(targets[datasource]) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT t.TABLE_SCHEMA, t.TABLE_NAME, t.ENGINE FROM "
                           "information_schema.TABLES t LEFT JOIN information_schema.ENGINES "
                           "e ON e.ENGINE = t.ENGINE WHERE t.TABLE_TYPE = 'BASE TABLE' AND "
                           "COALESCE(e.TRANSACTIONS, 'NO') <> 'YES' AND (t.TABLE_SCHEMA, "
                           f"t.TABLE_NAME) IN {_tables_in(names)}",
                           [part for name in names for part in name])
            found = cursor.fetchall()
        if found:
            schema, table, engine = found[0]
            raise ConfigError(engine_problem(pipeline_id, (datasource, str(schema),
                                                           str(table)), str(engine or "")))


def _target_key_columns(compiled: Any, schema: str, table: str) -> tuple[str, ...]:
    """The target's names of the columns the ``key_columns`` of a table's pair name."""
    pairs = compiled.pairs_for(*compiled.stored(schema, table))
    if not pairs or not pairs[0].pair.key_columns:
        return ()
    return tuple(pairs[0].renames.get(key, key) for key in pairs[0].pair.key_columns)


def _tables_in(names: list[tuple[str, str]]) -> str:
    return "(" + ", ".join(["(%s, %s)"] * len(names)) + ")"


def refuse_unsafe_tables(pipeline_id: str, compiled: Any, source: DataSource,
                         targets: dict[str, DataSource]) -> None:
    """At the start of a two-way pipeline: refuse a target table whose rows the conflict
    check cannot tell apart as the write does (:func:`table_problems`)."""
    keyed: dict[tuple[str, str, str], tuple[str, ...]] = {}
    for datasource, names in paired_targets(compiled, source, targets, keyed).items():
        args = [part for name in names for part in name]
        with connect(targets[datasource]) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, COLUMN_NAME FROM "
                           "information_schema.STATISTICS WHERE NON_UNIQUE = 0 AND "
                           f"(TABLE_SCHEMA, TABLE_NAME) IN {_tables_in(names)} "
                           "ORDER BY 1, 2, INDEX_NAME = 'PRIMARY' DESC, 3, SEQ_IN_INDEX", args)
            uniques = cursor.fetchall()
            cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE, "
                           "CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
                           "WHERE COLLATION_NAME IS NOT NULL AND (TABLE_SCHEMA, TABLE_NAME) "
                           f"IN {_tables_in(names)}", args)
            texts = cursor.fetchall()
            cursor.execute("SELECT EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, TRIGGER_NAME FROM "
                           "information_schema.TRIGGERS WHERE (EVENT_OBJECT_SCHEMA, "
                           f"EVENT_OBJECT_TABLE) IN {_tables_in(names)} ORDER BY 1, 2, 3", args)
            triggers = cursor.fetchall()
            cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM "
                           "information_schema.COLUMNS WHERE EXTRA LIKE '%%auto_increment%%' "
                           f"AND (TABLE_SCHEMA, TABLE_NAME) IN {_tables_in(names)} "
                           "ORDER BY 1, 2", args)
            counted = cursor.fetchall()
            theirs = _numbering(cursor) if counted else None
        problems = table_problems(f"pipeline {pipeline_id} (two-way): target table",
                                  datasource, uniques, texts, triggers, {
                                      (schema, table): named for (where, schema, table), named
                                      in keyed.items() if where == datasource})
        if theirs is not None and theirs == _source_numbering(source):
            schema, table, column = counted[0]
            problems.append(
                f"pipeline {pipeline_id} (two-way): table {schema}.{table} numbers rows by "
                f"AUTO_INCREMENT column {column}, and {source.name} and {datasource} number "
                f"alike (auto_increment_increment {theirs[0]}, offset {theirs[1]}): rows the "
                "two sides insert at once get the same ids, and one side's row would be "
                "written over the other's. Give each side its own numbers (SET GLOBAL "
                "auto_increment_increment = 2 on both, auto_increment_offset = 1 on one and 2 "
                "on the other, and in my.cnf), then start the channel again")
        if problems:
            raise ConfigError(problems[0])


def _numbering(cursor: Any) -> tuple[int, int]:
    """The connected server's auto_increment_increment and offset."""
    cursor.execute("SELECT @@auto_increment_increment, @@auto_increment_offset")
    increment, offset = cursor.fetchone()
    return int(increment), int(offset)


def _source_numbering(source: DataSource) -> tuple[int, int]:
    with connect(source) as conn, conn.cursor() as cursor:
        return _numbering(cursor)


def table_problems(who: str, datasource: str, uniques: Iterable[tuple[Any, ...]],
                   texts: Iterable[tuple[Any, ...]], triggers: Iterable[tuple[Any, ...]],
                   named: dict[tuple[str, str], tuple[str, ...]] | None = None
                   ) -> list[str]:
    """Why two-way rows of these target tables would differ on the two sides unseen:
    ``uniques`` (schema, table, index, column), ``texts`` (schema, table, column, type,
    charset, collation), ``triggers`` (schema, table, name), ``named`` the columns a
    pair's ``key_columns`` name on a table (by schema, table)."""
    keys: dict[tuple[str, str], dict[str, list[str]]] = {}
    for schema, table, index, column in uniques:
        keys.setdefault((str(schema), str(table)), {}).setdefault(str(index), []).append(
            str(column))
    problems = []
    for (schema, table), columns in (named or {}).items():
        indexes = keys.get((schema, table)) or next(  # (names as the server spells them)
            (found for (there, name), found in keys.items()
             if (there.lower(), name.lower()) == (schema.lower(), table.lower())), {})
        if {c.lower() for c in columns} not in [{c.lower() for c in index}
                                                for index in indexes.values()]:
            held = "; ".join(f"{name} ({', '.join(index)})" for name, index in indexes.items())
            problems.append(
                f"{who} {schema}.{table} on {datasource}: the pair's key_columns "
                f"({', '.join(columns)}) are not a unique key of it (its unique keys: "
                f"{held or 'none'}): the conflict check reads a row by the key_columns, "
                "while the write (INSERT … ON DUPLICATE KEY UPDATE) lands on the row its "
                "unique key collides with, so rows the two sides wrote under one unique key "
                "and two values of the other columns would overwrite each other unseen and "
                "the sides would differ. Name exactly the columns of the table's unique key "
                "in key_columns (or leave key_columns out), or replicate the table with a "
                "one-way channel, then start the channel again")
    for (schema, table), indexes in keys.items():
        if len(indexes) > 1:
            problems.append(
                f"{who} {schema}.{table} on {datasource} has {len(indexes)} unique keys "
                f"({', '.join(indexes)}): the conflict check reads a row by one key, while "
                "the write (INSERT … ON DUPLICATE KEY UPDATE) lands on the row any unique key "
                "collides with, so rows the two sides insert under two keys with one value of "
                "another unique key would overwrite each other unseen and the sides would "
                "differ. Keep one unique key on both sides, or replicate the table with a "
                "one-way channel, then start the channel again")
    for schema, table, column, data_type, charset, collation in texts:
        indexes = keys.get((str(schema), str(table)), {})
        key = next(iter(indexes.values()), [])
        why = loose_collation(str(data_type), str(collation))
        if str(column) in key and why:
            problems.append(
                f"{who} {schema}.{table} on {datasource}: key column {column} has collation "
                f"{collation}, under which the server takes {why} for one key, where the "
                "conflict check compares exact values: a key written on both sides in two "
                "such spellings would land on the other side's row unseen. Give the key a "
                f"binary collation that pads no spaces (… MODIFY {column} … COLLATE "
                f"{charset}_nopad_bin on MariaDB, {charset}_0900_bin on MySQL 8) on both "
                "sides, or replicate the table with a one-way channel, then start the "
                "channel again")
    for schema, table, name in triggers:
        problems.append(
            f"{who} {schema}.{table} on {datasource} has trigger {name}: the rows a trigger "
            "writes while setl loads ride in its marked transaction and never cross back, "
            "while the other side's own copy of the trigger writes its own, so they would be "
            "doubled or differ. Drop the table's triggers on both sides, or replicate it "
            "with a one-way channel, then start the channel again")
    return problems
