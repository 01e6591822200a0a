"""A merged table's upserts as ``LOAD DATA LOCAL INFILE … REPLACE`` instead of multi-row
``INSERT … ON DUPLICATE KEY UPDATE``: the target parses rows of tab-separated values much
faster than SQL (on the development machine 59k → 91k rows/s inserting sysbench rows, 67k
→ 116k overwriting them). Load sends the data from memory (:mod:`node.target.mysql.localdata`); it
runs in the batch's transaction like any statement, so exactly-once is unchanged.

``REPLACE`` deletes a row with the same key and inserts the new one. That is the upsert of
a whole row only where nothing else sees the difference, so it is used only for a table that
is merged by key (no foreign key to or from it, no other unique key: see
:mod:`node.merge`), has no triggers, and whose every upserted row carries every
column the target writes (a column-group or wide-row part writes some columns only). Values
go as the bytes the target stores (``CHARACTER SET binary``): text encoded in its column's
charset here, only for charsets decoded exactly (utf8mb4/utf8mb3, MariaDB's latin1, ascii),
and column types whose text form the server reads back as the same value. Anything else —
a BIT, a geometry, another charset, a value a charset cannot hold, an empty ENUM, text of a
charset kept as bytes (:class:`~node.charsets.Encoded`: sjis, big5, …) into a text column,
which the server must convert — makes the table's rows go as INSERTs, as before.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any

from node import charsets
from node.charsets import Encoded
from node.target.mysql.render import Column, Row
from node.target.mysql.sqltext import Sql, literal
from shared.identifiers import qualified, quote

# information_schema DATA_TYPE values whose text form LOAD DATA reads back as the value
TYPES = frozenset({
    "tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "float", "double",
    "date", "datetime", "timestamp", "time", "year", "char", "varchar", "tinytext", "text",
    "mediumtext", "longtext", "binary", "varbinary", "tinyblob", "blob", "mediumblob",
    "longblob", "enum", "set", "json"})
CODECS = {"utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8",
          "latin1": charsets.LATIN1, "ascii": "ascii"}
CHUNK = 8 << 20  # bytes of data in one LOAD DATA statement at most
FILE = "setl-rows"  # the name the statement asks for; Load serves the data under it
_ESCAPES = ((b"\\", b"\\\\"), (b"\t", b"\\t"), (b"\n", b"\\n"), (b"\r", b"\\r"),
            (b"\0", b"\\0"))
_SPECIALS = "\\\t\n\r\0"  # what a text value's field must escape
_NONE = type(None)
# a YEAR column's plan codec: LOAD DATA reads a field as text, and the text '0' is the
# year 2000 where the number 0 (an INSERT's) is 0000, so the year 0000 goes as '0000'
YEAR = "year"


def plan(columns: dict[str, Column], triggers: bool) -> list[tuple[str, str | None]] | None:
    """(column, codec) of the columns a REPLACE writes, in table order; None when the
    table's rows cannot go that way."""
    if triggers or not columns:
        return None
    found = []
    for name, column in columns.items():
        if column.generated:
            continue
        if column.data_type not in TYPES:
            return None
        codec = YEAR if column.data_type == "year" else None
        if column.charset and column.charset != "binary":
            codec = CODECS.get(column.charset)
            if codec is None:
                return None
        found.append((name, codec))
    return found or None


def _field(value: Any, codec: str | None) -> bytes:
    kind = type(value)
    if value is None:
        return b"\\N"
    if kind is int:
        return str(value).encode()
    if kind is str:
        raw = value.encode(codec or "utf-8")
    elif isinstance(value, bytes | bytearray):
        raw = bytes(value)
    else:
        text = literal(value)  # dates, times, decimals, floats, sets, JSON: as INSERT writes
        if text.startswith("'"):
            if isinstance(value, set | frozenset | dict | list):
                raise ValueError("a SET or JSON value goes as an INSERT")
            text = text[1:-1]
        return text.encode()
    return escaped(raw)


def escaped(raw: bytes) -> bytes:
    """A field's bytes with LOAD DATA's escapes (backslash, tab, newline, CR, NUL)."""
    for char, escape in _ESCAPES:
        if char in raw:
            raw = raw.replace(char, escape)
    return raw


def statements(schema: str, table: str, rows: list[Row], plan_: list[tuple[str, str | None]],
               enums: Iterable[str] = ()) -> list[Sql] | None:
    """The REPLACE statements of ``rows`` (every row carrying exactly the planned columns);
    None when a row or value cannot go this way (an empty ENUM value: strict mode refuses
    it in LOAD DATA; Load writes such a row leniently, by itself)."""
    names = [name for name, _ in plan_]
    if any(len(row) != len(names) for row in rows) or \
            any(set(row) != set(names) for row in rows[:1]):
        return None
    if any(row[name] == "" for name in enums for row in rows):
        return None
    if not rows:
        return []
    try:
        values = [list(map(operator.itemgetter(name), rows)) for name in names]
        fields = [_column(column, codec) for column, (_, codec) in zip(values, plan_,
                                                                        strict=True)]
    except (UnicodeEncodeError, ValueError, KeyError, TypeError):
        return None
    data = b"\n".join(map(b"\t".join, zip(*fields, strict=True))) + b"\n"
    return from_lines(schema, table, names, data)


def from_lines(schema: str, table: str, names: list[str], data: bytes) -> list[Sql]:
    """The statements that load ``data``, lines of ``names``' fields (each ending in a
    newline), cut at :data:`CHUNK` bytes."""
    head_ = head(schema, table, list(map(quote, names)))
    return [Sql(head_, count, data=piece) for count, piece in pieces(data)]


def replaces(schema: str, table: str, rows: list[Row], columns: dict[str, Column],
             triggers: bool) -> list[Sql] | None:
    """The REPLACE statements of whole ``rows`` into a table of ``columns``; None where they
    go as INSERTs (see :func:`plan` and :func:`statements`)."""
    plan_ = plan(columns, triggers)
    if plan_ is None:
        return None
    enums = [name for name, column in columns.items() if column.data_type == "enum"]
    return statements(schema, table, rows, plan_, enums)


def _column(values: Sequence[Any], codec: str | None) -> list[bytes]:
    """One column's fields. The common columns — integers, text without a character to
    escape — are made in one pass each (a catch-up renders every row of an insert run: the
    field-by-field way was a quarter of a Spark worker's time); anything else field by
    field."""
    kinds = set(map(type, values))
    if Encoded in kinds and codec is not None:  # text of a charset kept as bytes (sjis, …)
        raise ValueError("into a column of another charset it goes as an INSERT, converted")
    if codec == YEAR:
        return [b"0000" if value == 0 and type(value) is int else _field(value, None)
                for value in values]
    if kinds <= {int, _NONE}:
        return [b"\\N" if value is None else b"%d" % value for value in values]
    if kinds <= {str, _NONE} and not _special("\x01".join([value for value in values
                                                             if value])):
        encoding = codec or "utf-8"
        return [b"\\N" if value is None else value.encode(encoding) for value in values]
    return [_field(value, codec) for value in values]


def _special(text: str) -> bool:
    """Whether ``text`` holds a character to escape (five C-speed scans beat one regex)."""
    return any(char in text for char in _SPECIALS)


def head(schema: str, table: str, targets: list[str], sets: Sequence[str] = ()) -> str:
    """The statement that loads lines into ``targets`` (columns quoted, or user variables),
    then sets columns by ``sets`` (``col = expression``) if any."""
    text = (f"LOAD DATA LOCAL INFILE '{FILE}' REPLACE INTO TABLE {qualified(schema, table)} "
            "CHARACTER SET binary FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' "
            f"LINES TERMINATED BY '\\n' ({', '.join(targets)})")
    return f"{text} SET {', '.join(sets)}" if sets else text


def pieces(lines: bytes) -> Iterable[tuple[int, bytes]]:
    """Lines (each ending in ``\\n``) cut into statements of at most ``CHUNK`` bytes (or one
    line), with their line counts."""
    start = 0
    while start < len(lines):
        end = lines.rfind(b"\n", start, start + CHUNK)
        if end < start:  # one line longer than a statement: alone
            end = lines.index(b"\n", start)
        yield lines.count(b"\n", start, end + 1), lines[start:end + 1]
        start = end + 1


