"""MySQL/MariaDB column types as Delta (Arrow) types, and the values to match.

The type of a target column comes from the source column it is copied from, as the binlog's
table map describes it (``binlog_row_metadata=FULL``: signedness, precision, fractional
digits, charset), so it is the type the row was written with:

==========================  =========================================================
source                      Delta (Arrow)
==========================  =========================================================
TINYINT / SMALLINT / INT    byte / short / integer (unsigned: the next wider type)
MEDIUMINT                   integer
BIGINT                      long; BIGINT UNSIGNED: decimal(20,0)
FLOAT / DOUBLE              float / double
DECIMAL(p,s), p ≤ 38        decimal(p,s)
DECIMAL(p,s), p > 38        string: the exact digits (Delta's decimals stop at 38)
YEAR                        short
DATE                        date
DATETIME                    timestamp_ntz (µs; as written, no time zone)
TIMESTAMP                   timestamp (µs, UTC)
TIME                        string [-]HH:MM:SS[.f…] (Delta has no time of day past 24 h)
BIT(n)                      long (n < 64); decimal(20,0) (n = 64)
CHAR, VARCHAR, TEXT         string (decoded from the column's charset; one Python has
                            no codec for is refused: node.target.delta.tables)
ENUM, SET, JSON             string: the member, the members joined by ',', the document
BINARY(n)                   binary: n bytes (the zeros the binlog drops put back)
VARBINARY, BLOB             binary
GEOMETRY                    binary (MySQL's internal form: SRID, then WKB)
==========================  =========================================================

A zero or partial date (``0000-00-00``, ``2024-02-00``) has no Delta value: the batch
stops with the column and what to do, never writing NULL in its place. A column a
transform makes (virtual columns, joined columns) is a string.
"""

from __future__ import annotations

import datetime
import decimal
import re
from types import SimpleNamespace
from typing import Any, NamedTuple

from node.charsets import member

META_PREFIX = "_setl_"  # the columns setl adds (a source column may not start so)


class LakeColumn(NamedTuple):
    name: str
    kind: str  # see ARROW
    precision: int = 0
    scale: int = 0  # decimals; TIME, DATETIME, TIMESTAMP: fractional digits
    # a SET's members in definition order (text, or Encoded in a charset kept as bytes): a
    # subscription serves a processor's set of them in that order, as the source does
    members: tuple[str | bytes, ...] = ()


class t:
    TINY, SHORT, LONG, FLOAT, DOUBLE, TIMESTAMP, LONGLONG, INT24 = 1, 2, 3, 4, 5, 7, 8, 9
    DATE, TIME, DATETIME, YEAR, NEWDATE, VARCHAR, BIT = 10, 11, 12, 13, 14, 15, 16
    TIMESTAMP2, DATETIME2, TIME2 = 17, 18, 19
    JSON, NEWDECIMAL, ENUM, SET, BLOB, VAR_STRING, STRING, GEOMETRY = \
        245, 246, 247, 248, 252, 253, 254, 255


_INTS = {t.TINY: ("int8", "int16"), t.SHORT: ("int16", "int32"), t.INT24: ("int32", "int32"),
         t.LONG: ("int32", "int64"), t.LONGLONG: ("int64", "uint64")}
_TEXTS = (t.VARCHAR, t.VAR_STRING, t.STRING, t.BLOB)


def of_spec(column: Any, name: str) -> LakeColumn:
    """The lake column for a source column (a table map's column: type code, signedness,
    precision…) copied to ``name``."""
    kind = column.type
    if kind in _INTS:
        return LakeColumn(name, _INTS[kind][column.unsigned])
    if kind in (t.FLOAT, t.DOUBLE):
        return LakeColumn(name, "float32" if kind == t.FLOAT else "float64")
    if kind == t.NEWDECIMAL:
        if column.precision <= 38:
            return LakeColumn(name, "decimal", column.precision, column.decimals)
        return LakeColumn(name, "decimal_text", column.precision, column.decimals)
    if kind == t.YEAR:
        return LakeColumn(name, "int16")
    if kind in (t.DATE, t.NEWDATE):
        return LakeColumn(name, "date")
    if kind in (t.DATETIME, t.DATETIME2):  # (the fractional digits: a subscription's text)
        return LakeColumn(name, "datetime", 0, getattr(column, "fsp", 0))
    if kind in (t.TIMESTAMP, t.TIMESTAMP2):
        return LakeColumn(name, "timestamp", 0, getattr(column, "fsp", 0))
    if kind in (t.TIME, t.TIME2):
        return LakeColumn(name, "time", 0, column.fsp)
    if kind == t.BIT:
        return LakeColumn(name, "int64" if column.bits < 64 else "uint64")
    if kind == t.GEOMETRY:
        return LakeColumn(name, "binary")
    if kind == t.SET:
        return LakeColumn(name, "string", members=_members(column))
    if kind in (t.ENUM, t.JSON):
        return LakeColumn(name, "string")
    if kind in _TEXTS:
        if column.charset not in (None, "binary"):
            return LakeColumn(name, "string")
        if kind == t.STRING and column.max_length:  # BINARY(n): the binlog drops its
            return LakeColumn(name, "binary_fixed", column.max_length)  # trailing zeros
        return LakeColumn(name, "binary")
    return LakeColumn(name, "string")


def _members(column: Any) -> tuple[str | bytes, ...]:
    """A SET column's members in its charset, in definition order (none when unknown)."""
    found = getattr(column, "set_values", None) or ()
    try:
        return tuple(value if isinstance(value, str) else member(value, column.charset)
                     for value in found)
    except UnicodeDecodeError:  # (its values fail to decode as well, and say so)
        return ()


class TextColumn(NamedTuple):
    """A source column as information_schema.COLUMNS describes it (a table no table map of
    which was seen yet: a snapshot's)."""

    name: str
    data_type: str  # DATA_TYPE: int, varchar, …
    column_type: str  # COLUMN_TYPE: int(10) unsigned, decimal(65,30), time(3), …
    charset: str | None


_TEXT_INTS = {"tinyint": t.TINY, "smallint": t.SHORT, "mediumint": t.INT24, "int": t.LONG,
              "integer": t.LONG, "bigint": t.LONGLONG}
_TEXT_TYPES = {"float": t.FLOAT, "double": t.DOUBLE, "real": t.DOUBLE, "year": t.YEAR,
               "date": t.DATE, "datetime": t.DATETIME2, "timestamp": t.TIMESTAMP2,
               "time": t.TIME2, "bit": t.BIT, "json": t.JSON, "enum": t.ENUM, "set": t.SET,
               "decimal": t.NEWDECIMAL, "numeric": t.NEWDECIMAL}
_GEOMETRY = {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
             "multipolygon", "geometrycollection"}


def of_text(column: TextColumn, name: str) -> LakeColumn:
    """The lake column for a source column as information_schema gives it (the same as
    :func:`of_spec` gives for its table map's column)."""
    data_type, full = column.data_type.lower(), column.column_type.lower()
    numbers = [int(n) for n in re.findall(r"\d+", full.partition(")")[0])] \
        if "(" in full and data_type not in ("enum", "set") else []
    kind = _TEXT_INTS.get(data_type) or _TEXT_TYPES.get(data_type)
    if data_type in _GEOMETRY:
        kind = t.GEOMETRY
    if kind is None:  # char, varchar, binary, the texts and blobs
        kind = t.STRING if data_type == "binary" else t.BLOB
    spec = SimpleNamespace(
        type=kind, unsigned="unsigned" in full, charset=column.charset,
        precision=numbers[0] if kind == t.NEWDECIMAL and numbers else 10,
        decimals=numbers[1] if kind == t.NEWDECIMAL and len(numbers) > 1 else 0,
        fsp=numbers[0] if kind in (t.TIME2, t.DATETIME2, t.TIMESTAMP2) and numbers else 0,
        bits=numbers[0] if kind == t.BIT and numbers else 1,
        max_length=numbers[0] if data_type == "binary" and numbers else 0,
        set_values=tuple(text.replace("''", "'") for text in
                         re.findall(r"'((?:[^']|'')*)'", column.column_type))
        if data_type == "set" else None)
    return of_spec(spec, name)


def table_columns(layout: Any, map_name: Any) -> list[LakeColumn]:
    """The lake columns of a source table's columns that a pair copies: ``map_name`` gives
    a source column's target name, or None when the pair leaves it out."""
    found = []
    for column in layout.columns:
        name = map_name(column.name)
        if name is not None:
            found.append(of_text(column, name) if isinstance(column, TextColumn)
                         else of_spec(column, name))
    return found


def arrow_type(column: LakeColumn) -> Any:
    import pyarrow as pa  # in the worker and the node only when a lake is written

    kind = column.kind
    if kind == "decimal":
        return pa.decimal128(column.precision, column.scale)
    if kind == "uint64":
        return pa.decimal128(20, 0)
    return {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(),
            "int64": pa.int64(), "float32": pa.float32(), "float64": pa.float64(),
            "date": pa.date32(), "datetime": pa.timestamp("us"),
            "timestamp": pa.timestamp("us", tz="UTC"), "binary": pa.binary(),
            "binary_fixed": pa.binary(),
            }.get(kind, pa.string())


def conformed(rows: Any, held: Any) -> tuple[Any, str, str]:
    """``rows`` with each column in the type the Delta table ``held`` (an Arrow schema)
    holds it in, "" and "" — or the rows, the name of a column that cannot be and why: its
    source column's
    type changed (``ALTER TABLE … MODIFY`` without ddl_sync) and a Delta column keeps its
    type, while delta-rs casts what it writes into it without a word (6.75 into an integer
    column is 6). A column is cast where no value changes: an integer or a decimal whose
    values all fit the held type (checked value by value), a FLOAT into a double; any other
    change (a number becoming a double, text, a date…) is refused."""
    import pyarrow as pa

    for index, field in enumerate(rows.schema):
        if field.name not in held.names or field.type == held.field(field.name).type:
            continue
        want = _castable(field.type, held.field(field.name).type)
        was = f"{held.field(field.name).type} in the lake table, and the source gives " \
            f"{field.type} now"
        if want is None:
            return rows, field.name, was
        try:
            cast = rows.column(index).cast(want, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            return rows, field.name, f"{was}, with a value the lake's type cannot hold ({exc})"
        rows = rows.set_column(index, pa.field(field.name, want), cast)
    return rows, "", ""


def _castable(found: Any, held: Any) -> Any:
    """The type to cast a column of type ``found`` to for a table that holds ``held`` (a
    struct: a change log's before image, field by field), or None: no cast keeps it."""
    import pyarrow as pa

    if found == held:
        return held
    types = pa.types
    if (types.is_integer(found) and types.is_integer(held)) or \
            (types.is_decimal(found) and types.is_decimal(held)) or \
            (types.is_float32(found) and types.is_float64(held)):
        return held  # (a cast with safe=True refuses a value that does not fit)
    if types.is_struct(found) and types.is_struct(held):
        inside = {field.name: field.type for field in held}
        fields = []
        for field in found:
            want = _castable(field.type, inside[field.name]) if field.name in inside \
                else field.type
            if want is None:
                return None
            fields.append(pa.field(field.name, want))
        return pa.struct(fields)
    return None


STATS = "delta.dataSkippingStatsColumns"


def table_properties(schema: Any) -> dict[str, str]:
    """A new table's properties: file statistics only for the columns whose statistics
    delta-rs writes exactly. It writes a decimal's min/max as a 64-bit integer (scale 0;
    one past it becomes 9223372036854775807) or as a float (a 16th digit is rounded), and a
    reader that skips files by them (Spark, DataFusion, pyarrow through delta-rs) would
    skip files holding the rows it asks for: BIGINT UNSIGNED above 2^63, DECIMAL(18,4)
    99999999999999.9. So no statistics for a decimal of more than 15 digits (18 with no
    fraction), a struct (a change log's before image) or a name with a backtick."""
    import pyarrow as pa

    kept = []
    for field in schema:
        kind = field.type
        if pa.types.is_decimal(kind) and kind.precision > (18 if kind.scale == 0 else 15):
            continue
        if pa.types.is_struct(kind) or "`" in field.name:
            continue
        kept.append(f"`{field.name}`")
    if not kept:
        return {"delta.dataSkippingNumIndexedCols": "0"}
    return {STATS: ",".join(kept)}


def converter(column: LakeColumn) -> Any:
    """What a value needs before Arrow takes it (None: nothing)."""
    kind = column.kind
    if kind == "uint64":
        return _unsigned
    if kind == "decimal_text":
        return _decimal_text
    if kind == "time":
        fsp = column.scale
        return lambda value: time_text(value, fsp)
    if kind == "string":
        return _text
    if kind == "binary":
        return _binary
    if kind == "binary_fixed":
        size = column.precision
        return lambda value: None if value is None else _binary(value).ljust(size, b"\0")
    return None


def _unsigned(value: Any) -> Any:
    return None if value is None else decimal.Decimal(int(value))


def _decimal_text(value: Any) -> Any:
    return None if value is None else format(value, "f")


def _text(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8")  # an undecodable value fails the batch, named
    if isinstance(value, set | frozenset):
        return ",".join(sorted(value))
    return value


def _binary(value: Any) -> Any:
    return value.encode("utf-8") if isinstance(value, str) else value


def time_text(value: Any, fsp: int) -> Any:
    """A TIME as MySQL shows it: [-]HH:MM:SS with ``fsp`` fractional digits."""
    if not isinstance(value, datetime.timedelta):
        return value
    micro = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = "-" if micro < 0 else ""
    micro = abs(micro)
    seconds, fraction = divmod(micro, 1_000_000)
    text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    if fsp:
        text += "." + f"{fraction:06d}"[:fsp]
    return text
