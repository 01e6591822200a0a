"""Target columns a pair would write twice, from a source table's columns (read at ``setl
apply``, beside :func:`shared.tablekeys.keyless_tables`, and when a pipeline starts).

MySQL's and MariaDB's column names ignore case, while a row's columns are named as the
source and the pair write them: a virtual column ``total`` beside the source's ``Total``
gives the target row both, and the server refuses every such row (error 1110, ``Column
'Total' specified twice``), pausing the pipeline at run time. A virtual column named
exactly as a source column writes over its value (``id: id + 1000000``): no clash. A rename
(``column_pairs``) onto another column's name, in any case, writes two source columns to
one target column (the node's layout check stops it too, at run time).

A pair with a processor or joins is not checked: its rows' columns are its code's, or
another table's, as much as the source table's. Nor is a subscription's (its reader gets
each column by its own name: ``Total`` and ``total`` are two fields), nor a view (it logs no
row: a pattern taking it was refused for good, a review)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from shared.endpoint import connect
from shared.model import ColumnMode, DataSource, MediaPair, Pipeline, pairs_taking
from shared.patterns import SYSTEM_SCHEMAS

Columns = Mapping[tuple[str, str], tuple[str, ...]]  # a source's tables, their columns
_COLUMNS = """
SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA NOT IN ({system})
ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION
"""
_VIEWS = """
SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES
WHERE TABLE_TYPE = 'VIEW' AND TABLE_SCHEMA NOT IN ({system})
"""  # (read apart: the server joins information_schema's tables a row of one at a time)


def checked(pair: MediaPair) -> bool:
    """Whether a pair's written columns follow from the source table's alone."""
    return bool(pair.virtual_columns or pair.column_pairs) and not (
        pair.processor or pair.joins)


def read_columns(source: DataSource, pipelines: Iterable[Pipeline]) -> Columns | None:
    """The source's tables and their columns in order; None when no pair of ``pipelines``
    is checked (nothing to read). Raises ``SetlError``, ``pymysql.MySQLError``."""
    if not any(checked(pair) for pipeline in pipelines for pair in pipeline.pairs):
        return None
    found: dict[tuple[str, str], list[str]] = {}
    system = ", ".join(["%s"] * len(SYSTEM_SCHEMAS))
    with connect(source, connect_timeout=5) as conn, conn.cursor() as cursor:
        cursor.execute(_VIEWS.format(system=system), SYSTEM_SCHEMAS)
        views = {tuple(map(str, row.values() if isinstance(row, dict) else row))
                 for row in cursor.fetchall()}
        cursor.execute(_COLUMNS.format(system=system), SYSTEM_SCHEMAS)
        for row in cursor.fetchall():
            schema, table, column = (row.values() if isinstance(row, dict) else row)
            found.setdefault((str(schema), str(table)), []).append(str(column))
    return {name: tuple(columns) for name, columns in found.items() if name not in views}


def written(pair: MediaPair, columns: Sequence[str], keys: Sequence[str]
            ) -> list[tuple[str, str]]:
    """(source column, target column) of each column of a table the pair writes, as the
    node maps a row (``node.extract.pairs.CompiledPair.map_row``): the key always, an
    included column by its exact name, an excluded one in any case."""
    renames = {column.source: column.target for column in pair.column_pairs}
    include = set(pair.columns) if pair.column_mode is ColumnMode.INCLUDE else set()
    exclude = {name.lower() for name in pair.columns} \
        if pair.column_mode is ColumnMode.EXCLUDE else set()
    return [(name, renames.get(name, name)) for name in columns
            if name in keys or not ((exclude and name.lower() in exclude) or
                                    (include and name not in include))]


def pair_clashes(pair: MediaPair, schema: str, table: str, columns: Sequence[str],
                 keys: Sequence[str]) -> list[str]:
    """Why the pair would write one target column twice for a row of ``schema.table``."""
    found: list[str] = []
    by_name: dict[str, list[tuple[str, str]]] = {}
    for source, target in written(pair, columns, keys):
        by_name.setdefault(target.lower(), []).append((source, target))
    for both in by_name.values():
        if len(both) > 1:
            said = " and ".join(f"{source} (as {target})" if source != target else source
                                for source, target in both)
            found.append(
                f"writes columns {said} of {schema}.{table} to one target column (MySQL's "
                "column names ignore case), one value over the other in every row; rename "
                "one of them to another name in column_pairs, or leave one out (columns: "
                "exclude)")
    for filler in pair.virtual_columns:
        same = by_name.get(filler.name.lower(), [])
        if not same or any(target == filler.name for _, target in same):
            continue  # (a virtual column named as the source's writes over its value)
        source, target = same[0]
        was = f"column {source}" + (f" (renamed {target})" if source != target else "")
        found.append(
            f"virtual column {filler.name} and {was} of {schema}.{table} are one column "
            "name in another case: MySQL's column names ignore case, so every row would "
            "give the target that column twice (the server refuses it: error 1110, "
            "Column '…' specified twice) and the pipeline would pause. Rename the "
            f"virtual column (or name it {target}, exactly as the row has it, to write "
            f"over that value), or leave {source} out (columns: exclude) or rename it "
            "(column_pairs)")
    return found


def clash_problems(pipeline: Pipeline, columns: Columns,
                   keys: Mapping[tuple[str, str], tuple[str, ...] | None]) -> list[str]:
    """One problem per pair and table whose row would carry a target column twice
    (:func:`pair_clashes`); ``columns``: the source's tables and their columns, ``keys``:
    their row keys (a pair's ``key_columns`` are always written too)."""
    found: list[str] = []
    for (schema, table), names in sorted(columns.items()):
        for pair in pairs_taking(pipeline.pairs, schema, table, lambda pair: pair):
            if not checked(pair):
                continue
            key = pair.key_columns or keys.get((schema, table)) or ()
            found += [f"pipeline {pipeline.name} pair {pair.source} → {pair.target} {why}"
                      for why in pair_clashes(pair, schema, table, names, key)]
    return found
