"""One-way target key collations: a MySQL target table whose key column takes for one value
two its source column keeps apart ('a' and 'A' under a _ci collation where the source's is
_bin) would get two source rows written into one, silently; the planner stops the pipeline
first (:mod:`node.target.mysql.collations` compares two collations)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymysql

from node.extract.etl import CompiledPipeline
from node.target.mysql.collations import key_problem, source_collation
from node.target.mysql.facts import Target
from shared.endpoint import connect
from shared.errors import ConfigError, SourceError

Columns = dict[str, tuple[str, str | None]]  # a source table's: name → (type, collation)


def read_source_columns(source: Any, schema: str, table: str
                        ) -> dict[str, tuple[str, str | None]]:
    """A source table's columns: name → (data type, collation); {} without a source."""
    if source is None:
        return {}
    try:
        with connect(source) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT COLUMN_NAME, DATA_TYPE, COLLATION_NAME FROM "
                           "information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
                           "TABLE_NAME = %s", (schema, table))
            return {str(name): (str(data_type), str(collation) if collation else None)
                    for name, data_type, collation in cursor.fetchall()}
    except pymysql.MySQLError as exc:
        raise SourceError(f"source {source.name}: cannot read the columns of "
                          f"{schema}.{table}: {exc.args[-1] if exc.args else exc}") from None


class KeyCollations:
    """The check of each source and target table, once (again after a DDL: :meth:`forget`),
    with the source's columns as ``source_columns`` reads them (the source in use)."""

    def __init__(self, compiled: CompiledPipeline, facts: Any,
                 source_columns: Callable[[str, str], Columns]) -> None:
        self.compiled, self.facts, self.source_columns = compiled, facts, source_columns
        self._checked: set[tuple[tuple[str, str], Target]] = set()

    def forget(self) -> None:
        self._checked.clear()

    def check(self, name: tuple[str, str], target: Target, found: Any,
              primary_key: tuple[str, ...]) -> None:
        """Stop the pipeline when a key column of a MySQL target table takes for one value
        two its source column keeps apart ('a' and 'A' under a _ci collation where the
        source's is _bin): the rows would be written into one, silently
        (:mod:`node.target.mysql.collations`). Once per source and target table."""
        if (name, target) in self._checked:
            return
        if found.unique and found.columns:
            fills = self._fills(name, target, primary_key)
            problem = fills and key_problem(f"pipeline {self.compiled.pipeline_id}", target,
                                            found.columns, found.unique, fills)
            if problem:  # a copy refused is tried again: with the facts read again then
                self.facts.drop(target)  # (the column altered as the message says)
                raise ConfigError(problem)
        self._checked.add((name, target))

    def _fills(self, name: tuple[str, str], target: Target, primary_key: tuple[str, ...]
               ) -> dict[str, tuple[str, str, str]]:
        """The target columns (lower-cased) that the pairs taking source table ``name`` to
        ``target`` fill from its string columns: → (source column, type, collation). A
        processor's rows are its own, and a virtual column's value is not the source's; a
        key column goes even when a pair leaves it out."""
        schema, table = self.compiled.stored(*name)
        keys = set(self.compiled.configured_keys(schema, table)) | set(primary_key)
        strings = {column: (data_type, collation) for column, (data_type, collation)
                   in self.source_columns(schema, table).items()
                   if source_collation(data_type, collation) is not None}
        fills: dict[str, tuple[str, str, str]] = {}
        for entry in self.compiled.pairs_for(schema, table):
            slots = entry.route.slots if entry.route is not None else \
                [entry.address(schema, table)]
            if entry.pair.processor or target not in slots:
                continue
            virtual = {filler.name.lower() for filler in entry.fillers}
            for column, (data_type, collation) in strings.items():
                if column not in keys and column not in entry.pair.key_columns and (
                        column in entry.exclude or
                        (entry.include and column not in entry.include)):
                    continue
                written = entry.renames.get(column, column).lower()
                if written not in virtual:
                    fills[written] = (column, data_type,
                                      source_collation(data_type, collation) or "")
        return fills
