"""One-way MySQL target tables checked against their source tables before rows go: a key
column that takes for one value two its source column keeps apart ('a' and 'A' under a _ci
collation where the source's is _bin) would get two source rows written into one
(:mod:`node.target.mysql.collations` compares two collations); a column that rounds its
source column's values, or stores the time of the write for its NULLs, would hold other
values (:mod:`node.target.mysql.rounding`). Both silently; the planner stops the pipeline
first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymysql

from node.extract.etl import CompiledPipeline
from node.target.mysql.collations import key_problem, source_collation
from node.target.mysql.facts import Target
from node.target.mysql.rounding import SourceColumn, column_problem
from shared.endpoint import connect
from shared.errors import ConfigError, SourceError

Columns = dict[str, SourceColumn]  # a source table's, by name


def read_source_columns(source: Any, schema: str, table: str) -> Columns:
    """A source table's columns by name; {} without a source."""
    if source is None:
        return {}
    try:
        with connect(source) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT COLUMN_NAME, DATA_TYPE, COLLATION_NAME, IS_NULLABLE = 'YES', "
                           "COLUMN_TYPE, COALESCE(NUMERIC_PRECISION, 0), "
                           "COALESCE(NUMERIC_SCALE, DATETIME_PRECISION, 0) FROM "
                           "information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
                           "TABLE_NAME = %s", (schema, table))
            return {str(row[0]): SourceColumn(str(row[1]), str(row[2]) if row[2] else None,
                                              bool(int(row[3])), str(row[4]).lower(),
                                              int(row[5]), int(row[6]))
                    for row in cursor.fetchall()}
    except pymysql.MySQLError as exc:
        raise SourceError(f"source {source.name}: cannot read the columns of "
                          f"{schema}.{table}: {exc.args[-1] if exc.args else exc}") from None


class KeyCollations:
    """The check of each source and target table, once (again after a DDL: :meth:`forget`),
    with the source's columns as ``source_columns`` reads them (the source in use)."""

    def __init__(self, compiled: CompiledPipeline, facts: Any,
                 source_columns: Callable[[str, str], dict[str, Any]]) -> None:
        self.compiled, self.facts, self.source_columns = compiled, facts, source_columns
        self._checked: set[tuple[tuple[str, str], Target]] = set()

    def forget(self) -> None:
        self._checked.clear()

    def check(self, name: tuple[str, str], target: Target, found: Any,
              primary_key: tuple[str, ...]) -> None:
        """Stop the pipeline when a key column of a MySQL target table takes for one value
        two its source column keeps apart ('a' and 'A' under a _ci collation where the
        source's is _bin): the rows would be written into one, silently
        (:mod:`node.target.mysql.collations`); or when a column would store another value
        than its source column's (:mod:`node.target.mysql.rounding`). Once per source and
        target table."""
        if (name, target) in self._checked:
            return
        if found.columns:
            where = f"pipeline {self.compiled.pipeline_id}"
            filled = self._filled(name, target, primary_key)
            strings = {column: (source_name, held.data_type, collation)
                       for column, (source_name, held) in filled.items()
                       for collation in [source_collation(held.data_type, held.collation)]
                       if collation is not None}
            problem = found.unique and strings and key_problem(
                where, target, found.columns, found.unique, strings)
            for column_name, column in sorted(found.columns.items()):
                if problem:
                    break
                source_name, held = filled.get(column_name.lower(), ("", None))
                if held is not None:
                    problem = column_problem(where, target, column_name, column,
                                             source_name, held)
            if problem:  # a copy refused is tried again: with the facts read again then
                self.facts.drop(target)  # (the column altered as the message says)
                raise ConfigError(problem)
        self._checked.add((name, target))

    def _filled(self, name: tuple[str, str], target: Target, primary_key: tuple[str, ...]
                ) -> dict[str, tuple[str, SourceColumn]]:
        """The target columns (lower-cased) that the pairs taking source table ``name`` to
        ``target`` fill from its columns: → (source column, what it is). A processor's rows
        are its own, and a virtual column's value is not the source's; a key column goes
        even when a pair leaves it out."""
        schema, table = self.compiled.stored(*name)
        keys = set(self.compiled.configured_keys(schema, table)) | set(primary_key)
        held = {column: SourceColumn(*value)
                for column, value in self.source_columns(schema, table).items()}
        filled: dict[str, tuple[str, SourceColumn]] = {}
        for entry in self.compiled.pairs_for(schema, table):
            slots = entry.route.slots if entry.route is not None else \
                [entry.address(schema, table)]
            if entry.pair.processor or target not in slots:
                continue
            virtual = {filler.name.lower() for filler in entry.fillers}
            for column, source in held.items():
                if column not in entry.pair.key_columns and not entry.keeps(column, keys):
                    continue
                written = entry.renames.get(column, column).lower()
                if written not in virtual:
                    filled[written] = (column, source)
        return filled
