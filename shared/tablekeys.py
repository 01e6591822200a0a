"""Which columns identify a source table's rows, read from ``information_schema``.

A row is keyed by its primary key; a table without one by its first unique key whose columns
are all NOT NULL (a unique key over nullable columns admits several NULL rows, so it does
not identify one). A table with none of them is keyless: it replicates in source order, each
row found by its whole before image (``node.target.mysql.render``), so it needs no configuration
— unless its pair joins or merges parts of a wide row, which meet by key: such a pair needs
``key_columns``. Both the manager (at ``setl apply``) and the node (when a pipeline starts)
ask this."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import pymysql

from shared.columnclash import Columns, clash_problems, read_columns
from shared.endpoint import connect
from shared.errors import FreeDoorRequestError, SetlError
from shared.keyfillers import moved_key_notes, processor_key_notes
from shared.model import DataSource, Definitions, MediaPair, Pipeline, StartupMode, pairs_taking
from shared.patterns import SYSTEM_SCHEMAS

log = logging.getLogger("setl.tablekeys")

Indexes = Mapping[tuple[str, str], tuple[frozenset[str], ...]]  # unique NOT NULL, by table
_SYSTEM = "(" + ", ".join(f"'{name}'" for name in SYSTEM_SCHEMAS) + ")"
# (two reads joined here: the server joins information_schema's tables by scanning one for
# each row of the other — 35-42 s for 3,000 tables, at every start and after each DDL batch)
_KEYS = """
SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, COLUMN_NAME
FROM information_schema.STATISTICS
WHERE NON_UNIQUE = 0 AND TABLE_SCHEMA NOT IN
      {system} {only}
ORDER BY TABLE_SCHEMA, TABLE_NAME, INDEX_NAME <> 'PRIMARY', INDEX_NAME, SEQ_IN_INDEX
"""
_NULLS = """
SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS
WHERE IS_NULLABLE = 'YES' AND TABLE_SCHEMA NOT IN
      {system} {only}
"""
_TABLES = """
SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES
WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN
      {system} {only}
"""
_NULLABLE = """
SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS
WHERE IS_NULLABLE = 'YES' AND COLUMN_NAME IN ({names}) AND TABLE_SCHEMA NOT IN
      {system}
"""


def row_keys(cursor: Any, only: tuple[str, str] | None = None
             ) -> dict[tuple[str, str], tuple[str, ...] | None]:
    """Every user table (or only the one named) with the columns that key its rows (None:
    nothing does)."""
    where = "AND TABLE_SCHEMA = %s AND TABLE_NAME = %s" if only else ""
    cursor.execute(_TABLES.format(only=where, system=_SYSTEM), only)
    found: dict[tuple[str, str], tuple[str, ...] | None] = {
        (row[0], row[1]): None for row in _tuples(cursor.fetchall())}
    indexes = _unique_indexes(cursor, where, only)
    for (schema, table, index), columns in indexes.items():  # a column per row: its name
        if found.get((schema, table)) is None and (  # may hold a comma
                index == "PRIMARY" or not any(nullable for _, nullable in columns)):
            found[(schema, table)] = tuple(column for column, _ in columns)
    return found


def _unique_indexes(cursor: Any, where: str = "", only: tuple[str, str] | None = None
                    ) -> dict[tuple[str, str, str], list[tuple[str, bool]]]:
    """Every unique index of the user tables (or of the one named): (schema, table, index)
    → its columns with whether each admits NULL, primary keys first, in index order."""
    cursor.execute(_KEYS.format(only=where, system=_SYSTEM), only)
    rows = _tuples(cursor.fetchall())
    if not rows:
        return {}
    cursor.execute(_NULLS.format(only=where, system=_SYSTEM), only)
    nulls = {(schema, table, column.lower())
             for schema, table, column in _tuples(cursor.fetchall())}
    indexes: dict[tuple[str, str, str], list[tuple[str, bool]]] = {}
    functional = {(schema, table, index) for schema, table, index, column in rows
                  if column is None}  # (MySQL 8's key part over an expression: no column)
    for schema, table, index, column in rows:
        if (schema, table, index) not in functional:
            indexes.setdefault((schema, table, index), []).append(
                (column, (schema, table, column.lower()) in nulls))
    return indexes


def door_key(cursor: Any, schema: str, table: str, key_columns: Sequence[str] = ()
             ) -> tuple[str, ...]:
    """The columns the free door finds a table's rows by, as the table is now: the pair's
    ``key_columns``, else the table's own key. A table with no key of its own is refused
    (:class:`FreeDoorRequestError`): its rows replicate by their whole image, so a row read
    and written by ``key_columns`` would be inserted beside the target's copy, not over it."""
    found = row_keys(cursor, (schema, table))
    name = f"{schema}.{table}"
    if (schema, table) not in found:
        raise FreeDoorRequestError(f"table {name} does not exist on the source")
    own = found[(schema, table)]
    if own is None:
        raise FreeDoorRequestError(
            f"table {name} has no primary key and no unique key over NOT NULL columns, so the "
            "free door cannot copy its rows: they replicate by their whole image, and a row "
            "copied by key would be written beside the target's copy, not over it"
            + (f" (its pair's key_columns {', '.join(key_columns)} do not make it keyed)"
               if key_columns else "")
            + "; give the table a primary key, or copy its rows by hand")
    return tuple(key_columns) or own


def _tuples(rows: Any) -> list[tuple[Any, ...]]:
    """Rows of a plain or a dictionary cursor as tuples."""
    return [tuple(row.values()) if isinstance(row, dict) else tuple(row) for row in rows]


def _keyless_copy(pipeline: Pipeline, schema: str, table: str, pair: MediaPair) -> str:
    """Why 'start: snapshot' cannot copy a keyless table (the node's copy says the same:
    ``key_columns`` find rows for the stream, they do not make the table keyed for chunks)."""
    return (f"pipeline {pipeline.name}: table {schema}.{table} (pair {pair.source}) has no "
            "primary key and no unique key over NOT NULL columns, so 'start: snapshot' cannot "
            "copy it in chunks by key (its rows are written by their whole image, and a row "
            "copied twice would be there twice)"
            + (f"; its key_columns {', '.join(pair.key_columns)} do not make it keyed"
               if pair.key_columns else "")
            + "; give it a primary key, or start the pipeline with 'start: latest' and copy it "
            "by hand")


def _keyless_two_way(pipeline: Pipeline, schema: str, table: str, pair: MediaPair) -> str:
    """Why a two-way channel cannot replicate a keyless table."""
    return (f"pipeline {pipeline.name}: table {schema}.{table} (pair {pair.source}) has no "
            "primary key and no unique key over NOT NULL columns, and the channel is "
            "two-way: a row both sides write is found and settled by its key, and this "
            "table's rows have none"
            + (f" (key_columns {', '.join(pair.key_columns)} do not make it keyed)"
               if pair.key_columns else "")
            + "; give the table a primary key, or replicate it with a one-way channel")


def pipeline_keys(pipeline: Pipeline, keys: dict[tuple[str, str], tuple[str, ...] | None],
                  nullable: Collection[tuple[str, str, str]] = (), lake: bool = False,
                  two_way: bool = False, indexes: Indexes | None = None
                  ) -> tuple[dict[tuple[str, str], tuple[str, ...]], list[str]]:
    """For the tables the pipeline's pairs match: the unique keys to use where a table has
    no primary key, and a problem line for each keyless table whose pair needs a key (it
    joins or merges parts of a wide row) and has no 'key_columns', for each keyless table
    of a ``two_way`` channel (conflicts are found and settled by key), for each pair whose
    'key_columns' find rows by a column in ``nullable`` (see :func:`read_nullable`), and,
    when the pipeline writes a ``lake``, for each mirrored pair whose 'key_columns' may not
    identify one row (:func:`lake_key_problem`), and, given the source's unique NOT NULL
    ``indexes`` (:func:`read_indexes`), for each pair of a database target whose
    'key_columns' hold none of them (:func:`rekeyed_problem`)."""
    unique: dict[tuple[str, str], tuple[str, ...]] = {}
    problems = []
    for (schema, table), columns in sorted(keys.items()):
        for pair in pairs_taking(pipeline.pairs, schema, table, lambda pair: pair):
            if columns is None and two_way:
                problems.append(_keyless_two_way(pipeline, schema, table, pair))
                break
            if pair.key_columns:
                # rows are found by these columns when the table is keyed, or the pair
                # meets parts of a wide row by them; a keyless table's rows by their image
                found_by = columns is not None or pair.joins or pair.merge_part
                loose = [name for name in pair.key_columns
                         if (schema, table, name.lower()) in nullable]
                if loose and found_by and pair.mode != "changelog":
                    problems.append(
                        f"pipeline {pipeline.name}: table {schema}.{table} (pair "
                        f"{pair.source}) has key_columns {', '.join(loose)} that admit NULL, "
                        "and rows are found by them: a NULL key matches no row, so its "
                        "updates and deletes would be lost and two NULL-keyed rows taken for "
                        "one; name NOT NULL columns in 'key_columns' (or make these NOT NULL)")
                elif indexes is not None and columns is not None and not lake and not (
                        pair.joins or pair.merge_part or pair.mode == "changelog"):
                    problem = rekeyed_problem(pair.key_columns, columns,
                                              indexes.get((schema, table), ()))
                    if problem:
                        problems.append(f"pipeline {pipeline.name}: table {schema}.{table} "
                                        f"(pair {pair.source}) {problem}")
                if lake and pair.mode != "changelog":
                    problem = lake_key_problem(pair.key_columns, columns)
                    if problem:
                        problems.append(f"pipeline {pipeline.name}: table {schema}.{table} "
                                        f"(pair {pair.source}) {problem}")
                    elif columns is not None:  # a MERGE by key_columns: they hold the key
                        unique[(schema, table)] = columns
                if columns is None and pipeline.params.startup is StartupMode.SNAPSHOT:
                    problems.append(_keyless_copy(pipeline, schema, table, pair))
                break
            if columns is None:
                if pipeline.params.startup is StartupMode.SNAPSHOT:
                    problems.append(_keyless_copy(pipeline, schema, table, pair))
                elif pair.joins or pair.merge_part:
                    problems.append(
                        f"pipeline {pipeline.name}: table {schema}.{table} (pair "
                        f"{pair.source}) has no primary key and no unique key over NOT NULL "
                        "columns, and its pair joins or merges parts of a wide row by key; "
                        "name the columns that identify a row with 'key_columns:' on the pair")
            else:
                unique[(schema, table)] = columns
            break
    return unique, problems


def rekeyed_problem(key_columns: Sequence[str], own: Sequence[str],
                    indexes: Iterable[frozenset[str]]) -> str:
    """Why a keyed table's rows may not be found by ``key_columns`` on a database target
    ("" when they may: they hold its own key ``own`` or another of its unique NOT NULL
    ``indexes``, lower-cased, or are part of its own key). Columns that do not identify a
    row take two source rows for one target row: the second overwrites the first, and a
    delete of either deletes it."""
    named = {name.lower() for name in key_columns}
    mine = {name.lower() for name in own}
    if mine <= named or named < mine or any(index <= named for index in indexes):
        return ""  # (part of its key: a partitioned table's, whose key holds the partition
        # column, is identified by the rest; the operator names what identifies a row)
    return (f"finds rows by key_columns {', '.join(key_columns)}, which hold no unique key "
            f"of it (its key is {', '.join(own)}): two source rows with the same "
            f"{', '.join(key_columns)} would be one target row, the second overwriting the "
            "first and a delete of either deleting it. Leave key_columns out of the pair (its "
            "own key is used), or name the columns of one of its unique NOT NULL keys")


def read_indexes(source: DataSource, pipelines: Iterable[Pipeline]) -> Indexes | None:
    """The source's unique keys over NOT NULL columns (primary keys too), lower-cased, by
    table; None when no pair of ``pipelines`` names 'key_columns' (nothing to check)."""
    if not any(pair.key_columns for pipeline in pipelines for pair in pipeline.pairs):
        return None
    with connect(source, connect_timeout=5) as conn, conn.cursor() as cursor:
        found = _unique_indexes(cursor)
    indexes: dict[tuple[str, str], tuple[frozenset[str], ...]] = {}
    for (schema, table, _), columns in found.items():
        if not any(nullable for _, nullable in columns):
            indexes[(schema, table)] = (*indexes.get((schema, table), ()),
                                        frozenset(column.lower() for column, _ in columns))
    return indexes


def lake_key_problem(key_columns: Sequence[str], own: Sequence[str] | None) -> str:
    """Why a mirrored lake table may not merge a source table's rows by ``key_columns`` (""
    when it may): a MERGE by columns that do not hold the table's own key (``own``: its
    primary key, or the unique NOT NULL key it is keyed by; None: it has none) would take
    two source rows for one lake row. A database target refuses that itself (its table
    needs a unique key over them); a Delta table has no unique keys."""
    named = {name.lower() for name in key_columns}
    if own is None:
        return (f"is mirrored into a lake by key_columns {', '.join(key_columns)}, and has no "
                "primary key nor a unique key over NOT NULL columns: nothing says they "
                "identify one row, and a MERGE by them would keep one lake row for several "
                "source rows. Give the pair 'mode: changelog' (every change appended), or "
                "give the table a key")
    missing = [name for name in own if name.lower() not in named]
    if not missing:
        return ""
    return (f"is mirrored into a lake by key_columns {', '.join(key_columns)}, which leave "
            f"out {', '.join(missing)} of its own key ({', '.join(own)}): a MERGE by them "
            "would take two source rows for one lake row and keep only one. Leave "
            "key_columns out of the pair (its own key is used), name every column of its "
            "key in them, or give the pair 'mode: changelog' (every change appended)")


def read_keys(source: DataSource) -> dict[tuple[str, str], tuple[str, ...] | None]:
    """The source's tables and their row keys (raises ``SetlError``, ``pymysql.MySQLError``)."""
    with connect(source, connect_timeout=5) as conn, conn.cursor() as cursor:
        return row_keys(cursor)


def read_nullable(source: DataSource, pipelines: Iterable[Pipeline]
                  ) -> frozenset[tuple[str, str, str]]:
    """(schema, table, column) of the source's columns that admit NULL among those the
    pipelines' pairs name in 'key_columns' (raises ``SetlError``, ``pymysql.MySQLError``)."""
    names = sorted({name for pipeline in pipelines for pair in pipeline.pairs
                    for name in pair.key_columns})
    if not names:
        return frozenset()
    with connect(source, connect_timeout=5) as conn, conn.cursor() as cursor:
        cursor.execute(_NULLABLE.format(names=", ".join(["%s"] * len(names)), system=_SYSTEM),
                       names)
        return frozenset((schema, table, column.lower())
                         for schema, table, column in _tuples(cursor.fetchall()))


def keyless_tables(definitions: Definitions, stored: Callable[[str], DataSource],
                   notes: list[str] | None = None) -> list[str]:
    """Problems of keyless tables whose pairs need a key, of keys a lake cannot merge by
    (see :func:`pipeline_keys`), and of pairs writing a target column twice
    (:func:`shared.columnclash.clash_problems`); ``notes`` given, a line for each virtual
    column writing a key from more than the key (:func:`shared.keyfillers.moved_key_notes`),
    and for each pair whose processor may compute the key (:func:`processor_key_notes`).
    A source that
    cannot be reached is skipped here (logged); the node checks again at start."""
    sources = {source.name: source for source in definitions.sources}

    def kind(name: str) -> str:
        try:
            return (sources.get(name) or stored(name)).type
        except SetlError:
            return ""
    problems: list[str] = []
    keys_by_source: dict[str, dict[tuple[str, str], tuple[str, ...] | None]] = {}
    columns: dict[str, Columns | None] = {}
    nullable: dict[str, frozenset[tuple[str, str, str]]] = {}
    indexes: dict[str, Indexes | None] = {}
    for channel in definitions.channels:
        for pipeline in channel.pipelines:
            if pipeline.source not in keys_by_source:
                try:
                    source = sources.get(pipeline.source) or stored(pipeline.source)
                    keys_by_source[pipeline.source] = read_keys(source)
                    alike = [other for each in definitions.channels
                             for other in each.pipelines if other.source == pipeline.source]
                    nullable[pipeline.source] = read_nullable(source, alike)
                    indexes[pipeline.source] = read_indexes(source, alike)
                    columns[pipeline.source] = read_columns(source, alike)
                except (SetlError, pymysql.MySQLError) as exc:
                    log.warning("event=key_check_skipped channel=%s source=%s error=%s",
                                channel.name, pipeline.source, exc)
                    keys_by_source[pipeline.source] = {}
            _, found = pipeline_keys(pipeline, keys_by_source[pipeline.source],
                                     nullable.get(pipeline.source, frozenset()),
                                     kind(pipeline.target) == "delta", channel.two_way,
                                     indexes.get(pipeline.source))
            problems += [f"channel {channel.name} {problem}" for problem in found]
            read = columns.get(pipeline.source)
            subscribed = kind(pipeline.target) == "subscription"  # (no D, names keep case)
            if read is not None and not subscribed:
                problems += [f"channel {channel.name} {problem}" for problem in clash_problems(
                    pipeline, read, keys_by_source[pipeline.source])]
            if notes is not None:
                notes += [f"channel {channel.name} {note}" for note in
                          moved_key_notes(pipeline, keys_by_source[pipeline.source])]
            if notes is not None and not channel.two_way and not subscribed:
                notes += [f"channel {channel.name} {note}" for note in
                          processor_key_notes(pipeline, keys_by_source[pipeline.source])]
    return problems
