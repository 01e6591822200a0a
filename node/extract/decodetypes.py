"""How each binlog column type is read from a row image: a few lines of Python per column.

:mod:`node.extract.decodeplan` strings these lines together into one function per table and
columns-present bitmap. Integers, floats and strings are read inline; the other types call a
reader made here once per column (a decimal of its precision, a TIME of its fractional
digits, an ENUM's members already decoded). Every value is the one Select's reader gives
today (python-mysql-replication 1.0.x as ``tests/librows.py`` corrects it and
:mod:`node.select.binlog` mends it): the differential test ``tests/integration/
test_decode.py`` holds the two side by side. Types that reader cannot read exactly either
(MySQL's binary JSON, the old DECIMAL, a negative pre-5.6 TIME) fail with :class:`Undecodable`
instead of guessing. The readers of values are in :mod:`node.extract.decodevalues`.
"""

from __future__ import annotations

import codecs
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from node import charsets
from node.extract import decodevalues as values
from node.extract.decodevalues import PastEnd, Undecodable

if TYPE_CHECKING:
    from node.extract.decode import ColumnSpec

# the binlog's column types (MYSQL_TYPE_*; pymysqlreplication.constants.FIELD_TYPE)
DECIMAL, TINY, SHORT, LONG, FLOAT, DOUBLE, NULL, TIMESTAMP, LONGLONG, INT24 = range(10)
DATE, TIME, DATETIME, YEAR, NEWDATE, VARCHAR, BIT, TIMESTAMP2, DATETIME2, TIME2 = range(10, 20)
JSON, NEWDECIMAL, ENUM, SET, BLOB, VAR_STRING, STRING, GEOMETRY = \
    245, 246, 247, 248, 252, 253, 254, 255
TYPE_NAMES = {
    DECIMAL: "DECIMAL (pre-5.0)", TINY: "TINYINT", SHORT: "SMALLINT", LONG: "INT",
    FLOAT: "FLOAT", DOUBLE: "DOUBLE", NULL: "NULL", TIMESTAMP: "TIMESTAMP (pre-5.6)",
    LONGLONG: "BIGINT", INT24: "MEDIUMINT", DATE: "DATE", TIME: "TIME (pre-5.6)",
    DATETIME: "DATETIME (pre-5.6)", YEAR: "YEAR", NEWDATE: "NEWDATE", VARCHAR: "VARCHAR",
    BIT: "BIT", TIMESTAMP2: "TIMESTAMP", DATETIME2: "DATETIME", TIME2: "TIME", JSON: "JSON",
    NEWDECIMAL: "DECIMAL", ENUM: "ENUM", SET: "SET", BLOB: "BLOB/TEXT",
    VAR_STRING: "VAR_STRING", STRING: "CHAR/BINARY", GEOMETRY: "GEOMETRY"}
# fixed-width numbers: struct codes (signed, unsigned), merged into one unpack where no NULLs
STRUCT_CODES = {TINY: ("b", "B"), SHORT: ("h", "H"), LONG: ("i", "I"), LONGLONG: ("q", "Q"),
                FLOAT: ("f", "f"), DOUBLE: ("d", "d")}
_LATIN1 = "setl_mariadb_latin1"  # node.charsets' codec of MariaDB's latin1
_LATIN1_TABLE = bytes(range(256)).decode(_LATIN1)  # its charmap, for charmap_decode


def type_name(column: ColumnSpec) -> str:
    return TYPE_NAMES.get(column.type, f"type {column.type}")


def encoding(column: ColumnSpec) -> str | None:
    """The codec of a text column as Select picks it; None: undecodable, the value stays
    bytes (and the library gives '' for an empty one)."""
    if column.charset is None:
        return "utf-8"
    name = charsets.charset_to_encoding(column.charset)
    try:
        codecs.lookup(name)
    except LookupError:
        return None
    return name


def prefix_size(column: ColumnSpec) -> int:
    """Bytes of the length before a string's value (0: not a length-prefixed string)."""
    if column.type in (VARCHAR, STRING):
        return 2 if column.max_length > 255 else 1
    if column.type in (BLOB, GEOMETRY):
        return column.length_size
    return 0


def text_value(column: ColumnSpec, raw: str, ns: dict[str, Any]) -> str:
    """The expression of a string column's value from ``raw``, its bytes: decoded in its
    charset (strictly, as Select does), bytes for GEOMETRY, and for charsets Python lacks
    or reads otherwise :class:`~node.charsets.Encoded` bytes that name their charset (Load
    writes them so that the target converts them)."""
    if column.type == GEOMETRY:
        return raw  # bytes, even when empty
    codec = encoding(column)
    if codec is None and column.charset in (None, "binary"):
        return f"{raw} or ''"  # a binary string: bytes
    if codec is None:
        ns["ENCODED"] = charsets.Encoded
        return f"ENCODED(r, {column.charset!r}) if (r := {raw}) else ''"
    if codec == "utf-8":
        return f"{raw}.decode()"
    if codec == _LATIN1:  # ASCII is itself in latin1; else the charmap, straight
        ns["charmap_decode"], ns["LATIN1"] = codecs.charmap_decode, _LATIN1_TABLE
        return f"r.decode() if (r := {raw}).isascii() else charmap_decode(r, None, LATIN1)[0]"
    return f"{raw}.decode({codec!r})"


def at(base: str, o: int) -> str:
    """The expression of position ``base + o``."""
    return f"{base} + {o}" if o else base


def _text_lines(column: ColumnSpec, v: str, ns: dict[str, Any], base: str, o: int,
                to: str) -> list[str]:
    prefix = prefix_size(column)
    length = " | ".join(f"d[{at(base, o + k)}] << {8 * k}" if k else f"d[{at(base, o)}]"
                        for k in range(prefix)) if prefix <= 3 else \
        f"int.from_bytes(d[{at(base, o)}:{at(base, o + prefix)}], 'little')"
    end = to if to != base else "q"
    read = [f"{end} = {at(base, o + prefix)} + ({length})",
            f"{v} = {text_value(column, f'd[{at(base, o + prefix)}:{end}]', ns)}"]
    return read if end == to else [*read, f"{to} = {end}"]


def lines(column: ColumnSpec, i: int, v: str, ns: dict[str, Any], base: str = "p", o: int = 0,
          to: str = "p") -> tuple[list[str], int | None]:
    """Lines that read column ``i`` (present, not NULL) at ``d[base + o]`` into ``v``, and
    its size; None for a string, whose lines leave the position after it in ``to``.
    Helpers they call go into ``ns``."""
    kind = column.type
    here = at(base, o)
    if kind in STRUCT_CODES:
        if kind == TINY:
            if column.unsigned:
                return [f"{v} = d[{here}]"], 1
            ns["I8"] = _I8
            return [f"{v} = I8[d[{here}]]"], 1
        code = STRUCT_CODES[kind][column.unsigned]
        ns[f"S{code}"] = struct_reader(code)
        return [f"{v}, = S{code}(d, {here})"], _SIZES[code]
    if prefix_size(column):
        return _text_lines(column, v, ns, base, o, to), None
    if kind == INT24:
        return [f"{v} = int.from_bytes(d[{here}:{at(base, o + 3)}], 'little', "
                f"signed={not column.unsigned})"], 3
    if kind == YEAR:
        return [f"{v} = y + 1900 if (y := d[{here}]) else 0"], 1  # 0: the year 0000
    if kind == BIT and column.bits > 0:
        size = (column.bits + 7) // 8
        return [f"{v} = int.from_bytes(d[{here}:{at(base, o + size)}], 'big') & "
                f"{(1 << column.bits) - 1}"], size
    made = _READERS.get(kind)
    if made is None:
        ns[f"U{i}"] = _unsupported(column)
        return [f"U{i}()"], 0
    size, reader = made(column)
    ns[f"R{i}"] = reader
    return [f"{v} = R{i}(d, {here})"], size


def struct_reader(code: str) -> Callable[..., tuple[Any, ...]]:
    """``unpack_from`` of little-endian numbers of the struct ``code``s."""
    return struct.Struct("<" + code).unpack_from


_SIZES = {"b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "Q": 8, "f": 4, "d": 8}
_I8 = tuple(range(128)) + tuple(range(-128, 0))


def _unsupported(column: ColumnSpec) -> Callable[[], None]:
    if column.type == JSON:
        why = ("MySQL's binary JSON is not decoded by setl; replicate from MariaDB (whose JSON "
               "is LONGTEXT) or convert the column to LONGTEXT on the source")
    elif column.type == BIT:
        why = "a BIT column of 0 bits; check the source's table map"
    else:
        why = (f"setl does not decode the binlog's {type_name(column)} type; change the "
               "column to a current type on the source (ALTER TABLE … FORCE rebuilds old "
               "formats)")

    def fail() -> None:
        raise Undecodable(why)
    return fail


_READERS: dict[int, Callable[[Any], tuple[int, Callable[[bytes, int], Any]]]] = {
    NEWDECIMAL: values.newdecimal, DATE: values.date, TIME: values.old_time,
    DATETIME: values.old_datetime, TIMESTAMP: values.old_timestamp,
    TIMESTAMP2: values.timestamp2, DATETIME2: values.datetime2, TIME2: values.time2,
    ENUM: values.enum, SET: values.set_}
__all__ = ["STRUCT_CODES", "PastEnd", "Undecodable", "at", "lines", "prefix_size",
           "struct_reader", "text_value", "type_name"]
