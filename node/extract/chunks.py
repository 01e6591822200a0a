"""A source table split into key-range chunks of about ``chunk_size`` rows (see
docs/free-door-and-snapshots.md).

Shared by ``setl verify`` and the initial snapshot: pure functions on a DB-API cursor,
nothing of either. A table is split by the *first* column of its key (the primary key; else
the NOT NULL unique key :mod:`shared.tablekeys` picks; else the pair's ``key_columns``,
given by the caller) into half-open ranges ``[low, high)`` on that column, the first chunk
unbounded below and the last unbounded above, so every row, also one inserted after the
split, falls in exactly one chunk. A ``key_columns`` first column that admits NULL gets one
chunk more for its NULL rows.

- **Fixed steps** for a dense integer column: with ``rows`` rows between ``MIN`` and ``MAX``
  and ``(MAX - MIN + 1) / rows <= DENSE_FACTOR``, boundaries every
  ``ceil(chunk_size * (MAX - MIN + 1) / rows)`` values (:func:`fixed_bounds`); no query but
  the one that counts.
- **Stepped** otherwise (sparse integers, strings, dates, binary): each boundary is the
  value ``chunk_size`` rows after the previous one in key order,
  ``SELECT k FROM t WHERE k > ? ORDER BY k LIMIT 1 OFFSET chunk_size - 1``
  (:func:`stepped_bounds`), one index range scan over the whole table in all. The database
  compares, so collations order text as the table's index does.

A composite key is split by its first column only: a chunk holds every row whose first
column is in its range, so many rows sharing one first value make one large chunk.

Values are bound as query parameters, never formatted into SQL (so every query here has
parameters, and a ``where`` condition's ``%`` is escaped). Read a table's chunks in
sessions with the same settings as the split (setl's readers use ``time_zone = '+00:00'``,
so TIMESTAMP boundaries mean the same instants).

    key = table_key(cursor, "shop", "orders")
    plan = split(cursor, key, chunk_size=10_000, where="created < '2024-01-01'")
    for chunk in plan.chunks:
        rows = read_chunk(cursor, key, chunk, where="created < '2024-01-01'")
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql

from shared import identifiers
from shared.errors import ConfigError, SourceError
from shared.identifiers import qualified, quote
from shared.tablekeys import row_keys

DENSE_FACTOR = 2.0  # at most this many possible values per row: integers split by fixed steps
ESTIMATED_CHUNKS = 100  # a table at least this many chunks large is not counted: estimated
INTEGER_TYPES = frozenset(("tinyint", "smallint", "mediumint", "int", "integer", "bigint"))


@dataclass(frozen=True)
class SplitKey:
    """How a table is split: its key (``columns``) and what its first column is."""

    schema: str
    table: str
    columns: tuple[str, ...]  # the key; the table is split by columns[0]
    data_type: str = ""  # information_schema DATA_TYPE of columns[0]
    nullable: bool = False  # only a key_columns column may be: NULL rows get a chunk

    @property
    def column(self) -> str:
        return self.columns[0]

    @property
    def integer(self) -> bool:
        return self.data_type in INTEGER_TYPES

    @property
    def name(self) -> str:
        return qualified(self.schema, self.table)


@dataclass(frozen=True)
class Chunk:
    """Rows whose split column is in ``[low, high)``; None is unbounded on that side. The
    chunk of NULL values (``nulls``) has neither bound."""

    index: int
    low: Any = None
    high: Any = None
    nulls: bool = False


@dataclass(frozen=True)
class ChunkPlan:
    """A table's chunks, in key order (the NULL chunk, if any, last), with what the split
    saw: ``rows`` counted under the same condition (for a large table without one, the
    estimate of its statistics), and how the bounds were found."""

    key: SplitKey
    chunks: tuple[Chunk, ...]
    rows: int
    method: str  # fixed | stepped | single


def table_key(cursor: Any, schema: str, table: str,
              key_columns: Sequence[str] = ()) -> SplitKey | None:
    """The key a table is split by: ``key_columns`` when given, else its primary key or
    first NOT NULL unique key; None when the table does not exist or nothing keys it."""
    columns = tuple(key_columns) or row_keys(cursor, (schema, table)).get((schema, table))
    if not columns:
        return None
    cursor.execute("SELECT DATA_TYPE, IS_NULLABLE FROM information_schema.COLUMNS WHERE "
                   "TABLE_SCHEMA = %s AND TABLE_NAME = %s AND COLUMN_NAME = %s",
                   (schema, table, columns[0]))
    found = cursor.fetchone()
    if found is None:
        return None
    data_type, nullable = (found.values() if isinstance(found, dict) else found)
    return SplitKey(schema, table, tuple(columns), str(data_type).lower(), nullable == "YES")

UNORDERED = frozenset({"geometry", "point", "linestring", "polygon", "multipoint",
                       "multilinestring", "multipolygon", "geometrycollection"})


def split(cursor: Any, key: SplitKey, chunk_size: int, where: str = "") -> ChunkPlan:
    """Count the rows (under ``where``, an SQL condition) and find the chunk boundaries.
    A table whose statistics say it holds at least ``ESTIMATED_CHUNKS`` chunks of rows is
    not counted (a full index scan): the estimate only sizes the chunks, every row is in one
    whatever it says."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    if key.data_type in UNORDERED:
        raise ConfigError(f"{key.schema}.{key.table} cannot be split into chunks by its key "
                          f"column {key.column} ({key.data_type}: its values have no order "
                          "to cut ranges by); name other columns that identify a row with "
                          "'key_columns:' on the pair")
    column, condition = quote(key.column), _and("TRUE", where)
    # a FLOAT's bounds as the doubles it holds: its text (six digits) may round a bound to
    # or below the last, and stepping stood still (empty chunks, then one of the rest)
    value = f"CAST({column} AS DOUBLE)" if key.data_type == "float" else column
    low, high = _one(cursor, key, f"SELECT MIN({value}), MAX({value}) FROM {key.name} "
                                  f"WHERE {condition}", ())
    rows = 0 if where else int(_one(cursor, key, "SELECT COALESCE(MAX(TABLE_ROWS), 0) FROM "
                                                 "information_schema.TABLES WHERE "
                                                 "TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                                    (key.schema, key.table))[0])
    if rows < ESTIMATED_CHUNKS * chunk_size:
        rows = int(_one(cursor, key, f"SELECT COUNT(*) FROM {key.name} WHERE {condition}",
                        ())[0])
    nulls = key.nullable and _one(cursor, key, f"SELECT EXISTS (SELECT 1 FROM {key.name} WHERE "
                                          f"{column} IS NULL AND {condition})", ())[0]
    if low is None or rows <= chunk_size:
        bounds, method = [], "single"
    elif key.integer and dense(int(low), int(high), rows):
        bounds, method = fixed_bounds(int(low), int(high), rows, chunk_size), "fixed"
    else:
        step = (f"SELECT {value} FROM {key.name} WHERE {column} > %s AND {condition} "
                f"ORDER BY {column} LIMIT 1 OFFSET {chunk_size - 1}")
        bounds = stepped_bounds(low, lambda after: _value(cursor, key, step, (after,)),
                                limit=4 * rows // chunk_size + 10)
        method = "stepped"
    return ChunkPlan(key, chunks_of(bounds, nulls=bool(nulls)), rows, method)


def dense(low: int, high: int, rows: int) -> bool:
    """Whether integers from ``low`` to ``high`` held by ``rows`` rows are dense enough
    for fixed steps to give chunks of about the same size."""
    return rows > 0 and (high - low + 1) / rows <= DENSE_FACTOR


def fixed_bounds(low: int, high: int, rows: int, chunk_size: int) -> list[int]:
    """Boundaries every ``ceil(chunk_size * span / rows)`` values from ``low``: about
    ``chunk_size`` rows a chunk when the ``rows`` rows spread evenly over ``[low, high]``."""
    if rows <= 0 or high < low:
        return []
    step = max(1, math.ceil(chunk_size * (high - low + 1) / rows))
    return list(range(low + step, high + 1, step))


def stepped_bounds(first: Any, nth_after: Callable[[Any], Any | None],
                   limit: int = 1 << 40) -> list[Any]:
    """Boundaries found one after another: ``nth_after(v)`` is the value ``chunk_size``
    rows after ``v`` (strictly greater, in the database's order), None past the end.
    ``first`` is the smallest value; ``limit`` bounds the steps (a guard, never reached when
    each step moves forward)."""
    bounds: list[Any] = []
    current = first
    while len(bounds) < limit:
        found = nth_after(current)
        if found is None:
            break
        bounds.append(found)
        current = found
    return bounds


def chunks_of(bounds: Sequence[Any], nulls: bool = False) -> tuple[Chunk, ...]:
    """The chunks between boundaries: ``(-inf, b1), [b1, b2), …, [bn, +inf)``, then the
    NULL chunk when ``nulls``."""
    edges = [None, *bounds, None]
    made = [Chunk(index, edges[index], edges[index + 1]) for index in range(len(bounds) + 1)]
    if nulls:
        made.append(Chunk(len(made), nulls=True))
    return tuple(made)


def condition(key: SplitKey, chunk: Chunk, column: str | None = None
              ) -> tuple[str, list[Any]]:
    """The SQL condition selecting a chunk's rows and its parameters (``%s`` style);
    ``column`` names the split column where it is called otherwise (a target table's
    renamed column), default the key's own."""
    name = quote(column or key.column)
    if chunk.nulls:
        return f"{name} IS NULL", []
    parts, params = [], []
    if chunk.low is not None:
        parts.append(f"{name} >= %s")
        params.append(chunk.low)
    if chunk.high is not None:
        parts.append(f"{name} < %s")
        params.append(chunk.high)
    if not parts:
        return (f"{name} IS NOT NULL" if key.nullable else "TRUE"), []
    return " AND ".join(parts), params


def read_chunk(cursor: Any, key: SplitKey, chunk: Chunk, columns: str = "*",
               where: str = "", order: bool = False) -> list[Any]:
    """A chunk's rows (``columns`` is the select list, as SQL), in key order if ``order``."""
    sql, params = condition(key, chunk)
    ordered = " ORDER BY " + ", ".join(map(quote, key.columns)) if order else ""
    _run(cursor, key, f"SELECT {columns} FROM {key.name} WHERE {_and(sql, where)}{ordered}",
         params)
    return list(cursor.fetchall())


def locate(chunks: Sequence[Chunk], value: Any) -> Chunk:
    """The chunk holding ``value`` by Python's ordering: exact for numbers, dates and binary
    strings; text under a collation is ordered by the database (select with
    :func:`condition` instead)."""
    if value is None:
        found = [chunk for chunk in chunks if chunk.nulls]
        if not found:
            raise ValueError("no chunk holds NULL: the split column is NOT NULL")
        return found[0]
    ranged = [chunk for chunk in chunks if not chunk.nulls]
    lows = [chunk.low for chunk in ranged[1:]]
    return ranged[bisect.bisect_right(lows, value)]


def _and(sql: str, where: str) -> str:
    """``sql`` and the user's condition, whose ``%`` (``LIKE 'a%'``) is escaped for the
    parameter formatting every query here goes through."""
    return f"{sql} AND ({escaped(where)})" if where else sql


def escaped(where: str) -> str:
    """A condition written by a user, safe in a query that has ``%s`` parameters."""
    return identifiers.condition(where)


def _run(cursor: Any, key: SplitKey, sql: str, params: Sequence[Any]) -> None:
    """Execute, with a database error said as the table's (the condition may be the user's)."""
    try:
        cursor.execute(sql, params)
    except pymysql.MySQLError as exc:
        raise SourceError(f"cannot read {key.schema}.{key.table} by chunks: "
                          f"{exc.args[-1] if exc.args else exc}") from None


def _one(cursor: Any, key: SplitKey, sql: str, params: Sequence[Any]) -> tuple[Any, ...]:
    _run(cursor, key, sql, params)
    row = cursor.fetchone()
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)


def _value(cursor: Any, key: SplitKey, sql: str, params: Sequence[Any]) -> Any:
    _run(cursor, key, sql, params)
    row = cursor.fetchone()
    if row is None:
        return None
    return next(iter(row.values())) if isinstance(row, dict) else row[0]
