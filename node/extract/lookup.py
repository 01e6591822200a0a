"""Lookup (反查): the current source rows for a set of primary keys.

Used where a binlog image is not enough: column groups, N:1 table merges and the free door.
One :class:`Lookup` holds one connection (open one per Spark partition) and fetches keys in
chunks with ``SELECT … WHERE (k1, k2) IN ((…), (…))``. Rows come back as PyMySQL gives them,
which Load writes back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any

import pymysql
import pymysql.cursors

from node.changes import Row
from shared.endpoint import READING, DictCursor, connect
from shared.identifiers import quote
from shared.model import DataSource
from shared.tablekeys import row_keys

CHUNK = 500
_ASKED = "setl asked"  # the asked value's place, beside a matched row's columns


class Lookup:
    """Fetch current rows by key from one source; one connection, opened on first use."""

    def __init__(self, source: DataSource, chunk: int = CHUNK) -> None:
        self.source = source
        self.chunk = chunk
        self._conn: pymysql.Connection | None = None
        self.queries = 0
        self._keys: dict[tuple[str, str], tuple[str, ...] | None] = {}

    def _cursor(self) -> Any:
        if self._conn is None:
            # TIMESTAMP in UTC, as the binlog gives it and Load writes it
            self._conn = connect(self.source, autocommit=True,
                                 cursorclass=DictCursor,
                                 init_command=READING)
        return self._conn.cursor()

    def rows(self, schema: str, table: str, keys: tuple[str, ...],
             values: Iterable[tuple[Any, ...]]) -> dict[tuple[Any, ...], Row]:
        """The rows whose key is among ``values``, by key; keys not found are absent."""
        wanted = list(dict.fromkeys(tuple(value) for value in values))
        found: dict[tuple[Any, ...], Row] = {}
        if not wanted:
            return found
        columns = ", ".join(quote(name) for name in keys)
        one = "(" + ", ".join(["%s"] * len(keys)) + ")"
        with self._cursor() as cursor:
            for start in range(0, len(wanted), self.chunk):
                part = wanted[start:start + self.chunk]
                sql = (f"SELECT * FROM {quote(schema)}.{quote(table)} "
                       f"WHERE ({columns}) IN ({', '.join([one] * len(part))})")
                cursor.execute(sql, [item for value in part for item in value])
                self.queries += 1
                for row in cursor.fetchall():
                    found[tuple(row[name] for name in keys)] = row
        return found

    def matched(self, schema: str, table: str, column: str, values: Iterable[Any]
                ) -> dict[Any, Row]:
        """The row each value finds by ``column = value`` as the server compares them (the
        column's collation: ``'ABC'`` finds ``'abc'`` under a ``_ci`` one; ``42`` finds
        ``'42'``), by the value asked — matched again in Python, such a value found no row.
        A value that finds several rows (a column that is not a key) finds the last."""
        wanted = list(dict.fromkeys(values))
        found: dict[Any, Row] = {}
        with self._cursor() as cursor:
            for start in range(0, len(wanted), self.chunk):
                part = wanted[start:start + self.chunk]
                asked = " UNION ALL ".join(
                    [f"SELECT {index} AS i, %s AS v" for index in range(len(part))])
                cursor.execute(f"SELECT a.i AS `{_ASKED}`, t.* FROM ({asked}) a JOIN "
                               f"{quote(schema)}.{quote(table)} t ON t.{quote(column)} = a.v",
                               part)
                self.queries += 1
                for row in cursor.fetchall():
                    found[part[row.pop(_ASKED)]] = row
        return found

    def key_columns(self, schema: str, table: str) -> tuple[str, ...] | None:
        """The columns that key the table's rows (primary key, else a NOT NULL unique key);
        None when the table does not exist or nothing keys it."""
        found = self._keys.get((schema, table), ())
        if found == ():
            with self._cursor() as cursor:
                found = row_keys(cursor, (schema, table)).get((schema, table))
            self._keys[(schema, table)] = found
        return found

    def database_defaults(self, schema: str) -> tuple[str, str]:
        """The database's default charset and collation (("", "") when it is gone)."""
        with self._cursor() as cursor:
            cursor.execute("SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM "
                           "information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (schema,))
            row = cursor.fetchone()
        return (row["DEFAULT_CHARACTER_SET_NAME"], row["DEFAULT_COLLATION_NAME"]) if row \
            else ("", "")

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except pymysql.MySQLError:
                pass
            self._conn = None

    def __enter__(self) -> Lookup:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
