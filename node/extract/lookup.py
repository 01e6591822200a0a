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
from node.extract.reads import ReadColumn, columns_of, mend
from shared.endpoint import READ_ISOLATION, READING, DictCursor, connect
from shared.identifiers import quote
from shared.keysql import placed, placed_key
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
        self._columns: dict[tuple[str, str], tuple[ReadColumn, ...]] = {}

    def _cursor(self) -> Any:
        if self._conn is None:
            # TIMESTAMP in UTC, as the binlog gives it and Load writes it
            self._conn = connect(self.source, autocommit=True,
                                 cursorclass=DictCursor,
                                 init_command=READING, isolation=READ_ISOLATION)
        return self._conn.cursor()

    def rows(self, schema: str, table: str, keys: tuple[str, ...],
             values: Iterable[tuple[Any, ...]]) -> dict[tuple[Any, ...], Row]:
        """The rows whose key is among ``values``, by the key asked (the server's value may
        be another spelling of it: text kept as its bytes read back as text of the column's
        own charset, another case under a ``_ci`` collation); keys not found are absent."""
        wanted = list(dict.fromkeys(tuple(value) for value in values))
        found: dict[tuple[Any, ...], Row] = {}
        if not wanted:
            return found
        columns = "(" + ", ".join(quote(name) for name in keys) + ")"
        with self._cursor() as cursor:
            described = {column.name: column for column in self._read_columns(schema, table)}
            converted = [described[name].charset if name in described else None
                         for name in keys]
            collations = [described[name].collation if name in described else None
                          for name in keys]
            for start in range(0, len(wanted), self.chunk):
                part = wanted[start:start + self.chunk]
                asked = [placed_key(key, converted, collations) for key in part]
                args = [arg for _, given in asked for arg in given]
                which = ", ".join(f"IF({columns} = {place}, {i}, NULL)"
                                  for i, (place, _) in enumerate(asked))
                for row in self._select(cursor, schema, table, f"CONCAT_WS(',', {which})", (
                        f"WHERE {columns} IN ({', '.join(place for place, _ in asked)})",
                        args + args)):
                    for i in _indexes(row.pop(_ASKED)):  # every key asked that finds it
                        found[part[i]] = row
        return found

    def matched(self, schema: str, table: str, column: str, values: Iterable[Any]
                ) -> dict[Any, Row]:
        """The row each value finds by ``column = value`` as the server compares them (the
        column's collation: ``'ABC'`` finds ``'abc'`` under a ``_ci`` one; ``42`` finds
        ``'42'``), by the value asked — matched again in Python, such a value found no row.
        A value that finds several rows (a column that is not a key) finds one of them."""
        left = list(dict.fromkeys(values))
        found: dict[Any, Row] = {}
        name = quote(column)
        with self._cursor() as cursor:
            while left:
                part, left = left[:self.chunk], left[self.chunk:]
                while part:  # two values the collation takes for one: the next pass
                    asked = [placed(value) for value in part]
                    args = [value for value, (_, given) in zip(part, asked, strict=True)
                            if given]
                    cases = " ".join(f"WHEN {name} = {place} THEN {i}"
                                     for i, (place, _) in enumerate(asked))
                    rows = self._select(cursor, schema, table, f"CASE {cases} END", (
                        f"WHERE {name} IN ({', '.join(place for place, _ in asked)})",
                        args + args))
                    hits = {row.pop(_ASKED): row for row in rows}
                    found.update((part[i], row) for i, row in hits.items())
                    part = [value for i, value in enumerate(part) if i not in hits] \
                        if hits else []
        return found

    def _select(self, cursor: Any, schema: str, table: str, asked: str,
                where: tuple[str, list[Any]]) -> list[Row]:
        """Rows of a table as the binlog gives them (:mod:`node.extract.reads`: a FLOAT as
        the double it holds, not its six printed digits; a BIT as a number; a BINARY value
        without its padding), with ``asked`` beside them when given."""
        columns = self._read_columns(schema, table)
        chosen = ", ".join(column.expression + (f" AS {quote(column.name)}" if
                                                column.expression != quote(column.name) else "")
                           for column in columns) or "*"
        extra = f", {asked} AS `{_ASKED}`" if asked else ""
        cursor.execute(f"SELECT {chosen}{extra} FROM {quote(schema)}.{quote(table)} {where[0]}",
                       where[1])
        self.queries += 1
        rows = list(cursor.fetchall())
        if not columns:
            return rows
        names = [column.name for column in columns]
        mended = mend(columns, [tuple(row[name] for name in names) for row in rows])
        out = []
        for row, values in zip(rows, mended, strict=True):
            fixed = dict(zip(names, values, strict=True))
            if asked:
                fixed[_ASKED] = row[_ASKED]
            out.append(fixed)
        return out

    def _read_columns(self, schema: str, table: str) -> tuple[ReadColumn, ...]:
        columns = self._columns.get((schema, table))
        if columns is None:
            assert self._conn is not None
            with self._conn.cursor(pymysql.cursors.Cursor) as plain:
                columns = self._columns[(schema, table)] = columns_of(plain, schema, table)
        return columns

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


def _indexes(asked: str | bytes | None) -> list[int]:
    """The asked keys' places a row's ``CONCAT_WS`` lists (``'0,3'``)."""
    text = asked.decode() if isinstance(asked, bytes) else asked
    return [int(i) for i in text.split(",")] if text else []
