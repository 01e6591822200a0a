"""How verify reads and hashes a row, so that equal rows hash equal on both sides.

**Reading.** Both sides are read with the same select list (:func:`select_list`) in
sessions with ``time_zone = '+00:00'``, and mended (:func:`decoded`), as the node's
snapshot reads are (:mod:`node.extract.reads`), which gives the values in the form the
binlog decoder (:mod:`node.extract.decode`) gives Extract: FLOAT as the exact double of the
stored single (``CAST(f AS DOUBLE)``; its text would be rounded to six digits), BIT as an
integer (``b + 0``), TIMESTAMP in UTC, zero and partial dates as text, the zero
TIMESTAMP(n) without its fraction, BINARY(n) without its zero padding, text in a charset
Python does not read exactly (sjis, big5, …) as its bytes. So a source row read here goes
through Extract/Transform exactly as its binlog image would, and a virtual column computed
from it is the stream's (a SELECT's own values made ``length(b)`` of a BINARY(4) 4 where the
stream wrote 2: a false difference, which ``--repair`` rewrote on every run). A target's
rows are mended alike, by its own columns, so a column copied as it is compares equal.

**Hashing in Python** (:func:`row_hash`, the ``rows`` method): each compared value is made
canonical for the *target* column it lands in (:func:`canonical`), as the target would
store what Load writes: an integer column holds ``7`` whether Transform made ``7``,
``7.0`` or ``"7"``, a DECIMAL compares by value (``1.5`` = ``1.50``), a FLOAT column by the
single it stores, a date column's text without a zero fraction; the rest by text or bytes.
The hash is 64 bits of BLAKE2b over the compared columns by name.

**Hashing in SQL** (:func:`sql_hash`, the ``sql`` method, for pairs that only rename and
choose columns between columns of one type): the database hashes each row itself, as
pt-table-checksum does, over the values joined with ``CONCAT_WS`` (by ``SEPARATOR``, not
pt-table-checksum's ``#``, which text holds) and a mask of which are
NULL (for columns that admit it). A chunk compares by ``COUNT(*)`` and ``BIT_XOR`` of
``CRC32 * 2654435761`` first: 32 bits a row, as pt-table-checksum's CRC32, so a chunk that
differs passes for equal once in 2^32; a CRC alone is linear and two rows changed by the
same bits would cancel in the XOR (pt-table-checksum's blind spot), the product does not.
Rows are compared (in chunks whose sums differ, and in re-checks) by 64 bits:
``CRC32 * 2654435761`` XOR ``CRC32C << 32`` where the server has CRC32C (MariaDB 10.8+),
else the first 64 bits of ``MD5``. Measured on sysbench rows, per million rows and server:
0.5 CPU-s to scan, 1.0 with the narrow hash, 1.6 with the wide one, 2.1 with a NULL mask
over every column, about 4 with MD5.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql

from node.extract.reads import ReadColumn, mend
from shared import datatypes
from shared.datatypes import BINARY, INTEGER, TEMPORAL
from shared.identifiers import quote

TEXT = datatypes.TEXT | {"json"}  # a JSON value hashes as its text
_COLUMNS = ("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME, IS_GENERATED, "
            "IS_NULLABLE, COLLATION_NAME FROM information_schema.COLUMNS WHERE "
            "TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION")
_SINGLE = struct.Struct("<f")


@dataclass(frozen=True)
class Column:
    """A column as information_schema describes it."""

    name: str
    data_type: str
    column_type: str
    charset: str | None = None
    generated: bool = False
    nullable: bool = True
    # a target text column whose source column's charset is one kept as bytes, and another:
    # read converted into the source's (``charset``), bytes beside bytes
    converted: bool = False
    own_charset: str | None = None  # a converted column's own charset (``charset``: the source's)
    # its own collation (a converted column's too: its own charset's), which a key's text
    # is compared in (:mod:`shared.keysql`)
    collation: str | None = None

    @property
    def kind(self) -> str:
        """How its values compare: int, decimal:SCALE, double, single, temporal, time,
        text, binary, bit or other."""
        data_type = self.data_type
        if data_type in INTEGER:
            return "int"
        if data_type in ("decimal", "numeric"):
            scale = self.column_type.partition(",")[2].rstrip(") unsigedzrfl")
            return f"decimal:{scale or 0}"
        if data_type == "float":
            return "single"
        if data_type in ("double", "real"):
            return "double"
        if data_type in TEMPORAL:
            return "temporal"
        if data_type == "time":
            return "time"
        if data_type == "bit":
            return "bit"
        if data_type in BINARY:
            return "binary"
        if data_type in TEXT:
            return "text"
        return "other"

    @property
    def shape(self) -> tuple[str, str | None]:
        """What must match for the database to print two values alike."""
        return self.column_type.lower(), self.charset


def read_columns(cursor: Any, schema: str, table: str) -> list[Column]:
    """The table's columns in order (empty when the table does not exist)."""
    cursor.execute(_COLUMNS, (schema, table))
    found = []
    for row in cursor.fetchall():
        name, data_type, column_type, charset, generated, nullable, collation = \
            row.values() if isinstance(row, dict) else row
        found.append(Column(name, str(data_type).lower(), str(column_type), charset,
                            str(generated or "NEVER").upper() != "NEVER", nullable == "YES",
                            collation=collation or None))
    return found


def read_expression(column: Column) -> str:
    """The select-list item reading one column in the binlog decoder's form, as the node's
    reads select it (:func:`shared.datatypes.read_expression`), under its own name."""
    name = quote(column.name)
    if column.converted:
        return f"CAST(CONVERT({name} USING {column.charset}) AS BINARY) AS {name}"
    expression = datatypes.read_expression(column.name, column.data_type, column.charset)
    return name if expression == name else f"{expression} AS {name}"


def select_list(columns: Iterable[Column]) -> str:
    return ", ".join(read_expression(column) for column in columns)


def decoded(columns: Sequence[Column], rows: Iterable[tuple[Any, ...]]
            ) -> list[tuple[Any, ...]]:
    """Rows read by :func:`select_list` of ``columns``, in the binlog decoder's form
    (:func:`node.extract.reads.mend`, which the snapshot's reads go through)."""
    return mend([ReadColumn(c.name, c.data_type, c.column_type.lower(), c.charset, c.nullable)
                 for c in columns], rows)


def canonical(value: Any, kind: str) -> bytes:
    """A value as the bytes it compares by, in a column of ``kind``."""
    if value is None:
        return b"\x00"
    if isinstance(value, bool):
        value = int(value)
    try:
        if kind == "int" and not isinstance(value, bytes | bytearray):
            number = decimal.Decimal(str(value)).to_integral_value(decimal.ROUND_HALF_UP)
            return b"i" + str(int(number)).encode()
        if kind.startswith("decimal") and not isinstance(value, bytes | bytearray):
            scale = int(kind.partition(":")[2] or 0)
            number = decimal.Decimal(str(value)).quantize(decimal.Decimal(1).scaleb(-scale),
                                                          decimal.ROUND_HALF_UP)
            return b"n" + format(number.normalize(), "f").encode()
        if kind == "double" and not isinstance(value, bytes | bytearray):
            return b"n" + format(decimal.Decimal(float(value)).normalize(), "f").encode()
        if kind == "single" and not isinstance(value, bytes | bytearray):
            return b"n" + repr(_SINGLE.unpack(_SINGLE.pack(float(value)))[0]).encode()
        if kind == "bit":
            number = int.from_bytes(value, "big") if isinstance(value, bytes | bytearray) \
                else int(value)
            return b"i" + str(number).encode()
    except (ValueError, ArithmeticError, OverflowError, struct.error):
        pass  # not a number after all: compared as its text below
    if kind == "temporal" and isinstance(value, str):
        head, dot, fraction = value.partition(".")
        return b"t" + (head if not dot or not fraction.strip("0") else value).encode()
    return b"t" + _text(value)


def _text(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, datetime.datetime):
        return value.isoformat(" ").encode()
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat().encode()
    if isinstance(value, datetime.timedelta):
        return str(value // datetime.timedelta(microseconds=1)).encode()
    if isinstance(value, decimal.Decimal):
        return format(value, "f").encode()
    if isinstance(value, set | frozenset):
        return ",".join(sorted(map(str, value))).encode()
    if isinstance(value, float):
        return repr(value).encode()
    return str(value).encode()


Rows = tuple[int, ...]  # the hashes of a key's rows in one table, sorted: a multiset


def add_row(found: dict[Any, Rows], name: Any, value: int) -> None:
    """One more row hashed ``value`` under ``name`` (a key, or a target table of a key)."""
    held = found.get(name)
    found[name] = (value,) if held is None else tuple(sorted((*held, value)))


def row_hash(row: dict[str, Any], columns: Iterable[str], kinds: dict[str, str]) -> int:
    """64 bits of BLAKE2b over ``columns`` of ``row`` (absent columns as NULL), each value
    canonical for its target column's kind."""
    digest = hashlib.blake2b(digest_size=8)
    for name in columns:
        value = canonical(row.get(name), kinds.get(name, "other"))
        digest.update(len(name).to_bytes(2, "little") + name.encode("utf-8", "surrogatepass"))
        digest.update(len(value).to_bytes(4, "little") + value)
    return int.from_bytes(digest.digest(), "little")


def sql_hash(columns: Iterable[str], nullable: Iterable[bool] = (), wide: bool = True,
             function: str = "crc", kinds: Iterable[str] = ()) -> str:
    """The SQL expression of a row's hash over ``columns`` (in this order): the values
    joined by ``SEPARATOR`` and, for the columns ``nullable`` marks (those that admit NULL on
    either side), which are NULL (``CONCAT_WS`` skips NULLs). ``kinds`` (:attr:`Column.kind`
    of each) says how a value is printed: a FLOAT as the double it holds (its own text keeps
    six digits: 1234567 and 1234568 print alike); the byte lengths of the binary values but
    the last go after the rest, so bytes that hold the separator cannot pass for it
    (``'a#', 'b'`` and ``'a', '#b'`` joined by ``#``, pt-table-checksum's separator, are one
    text). ``wide``: 64 bits (CRC32 and CRC32C, or MD5 where ``function`` is md5), for rows;
    else CRC32 × 2654435761, for a chunk's XOR."""
    names = [quote(name) for name in columns]
    kinds = list(kinds) or ["other"] * len(names)
    marks = list(nullable) or [True] * len(names)
    values = [f"CAST({name} AS DOUBLE)" if kind == "single" else name
              for name, kind in zip(names, kinds, strict=True)]
    free = [name for name, kind in zip(names, kinds, strict=True) if kind in _FREE]
    lengths = [f"LENGTH({name})" for name in free[:-1]]
    masked = [f"ISNULL({name})" for name, mark in zip(names, marks, strict=True) if mark]
    mask = [f"CONCAT({', '.join(masked)})"] if masked else []
    joined = f"CONCAT_WS('{SEPARATOR}', {', '.join([*values, *mask, *lengths])})"
    if not wide:
        return f"(CRC32({joined}) * 2654435761)"
    if function == "crc":
        return f"((CRC32({joined}) * 2654435761) ^ (CRC32C({joined}) << 32))"
    return f"CAST(CONV(LEFT(MD5({joined}), 16), 16, 10) AS UNSIGNED)"


# joins a row's values: ASCII's unit separator, which text does not hold (a value that
# held it, beside another's change that moved it, could pass; binary values, which may hold
# any byte, carry their lengths); one byte in every charset, so it costs what '#' cost
SEPARATOR = "\x1f"
_FREE = frozenset(("binary", "other"))  # kinds whose values may hold any byte


def hash_function(cursors: Iterable[Any]) -> str:
    """crc when every server has CRC32C, else md5 (both sides must hash alike)."""
    for cursor in cursors:
        try:
            cursor.execute("SELECT CRC32C('')")
            cursor.fetchall()
        except pymysql.MySQLError:  # "FUNCTION CRC32C does not exist": an older server
            return "md5"
    return "crc"
