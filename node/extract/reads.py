"""Rows read from the source inside a watermark window, and how they join the stream.

A snapshot chunk or a free-door request is read by SELECT between a low and a high
watermark (:mod:`node.snapshot`). The rows are read in the form the binlog decoder gives
(:mod:`node.extract.decode`) — FLOAT as the double of the stored single, BIT as an integer,
TIMESTAMP in UTC, BINARY without its zero padding, an empty binary string as ``''`` — so
that a row read here is written, and compared by key, exactly as its binlog image would be.

A read travels as a :class:`Read`: the rows pickled (the node never unpacks them), the
window's places in its batch, and its table. In the part that holds the table's changes,
:func:`joined` drops every row whose key the stream changed inside the window (the
stream's change is newer, or as new) and puts the rest in at the window's end, as inserts
— for a MySQL target at its start, which is the same for those rows and lets the target's
foreign keys redo a cascade the stream's changes inside the window fire (:func:`joined`):
so a read row never overwrites a newer one and a reader of the target sees the rows as
they were at the high watermark, with everything before it. Keys asked deleted (a free-door
``D``) are deleted at the window's start, before the stream's changes inside it.
"""

from __future__ import annotations

import datetime
import decimal
import pickle
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from node.changes import ChangeType, RowChange
from node.charsets import Encoded, python_codec
from node.extract.copylines import LinesPlan
from node.jobs import PAST, READ_BIT, ROW_BITS
from shared import datatypes
from shared.errors import SourceError
from shared.identifiers import qualified
from shared.retl import time_text

INSIDE = READ_BIT  # a read's rows go between the window's last event and the next
ZERO_TIMESTAMP = "0000-00-00 00:00:00"  # the decoder's zero TIMESTAMP, whatever its fraction


@dataclass(frozen=True)
class ReadColumn:
    """A source column as a read selects and mends it."""

    name: str
    data_type: str
    column_type: str = ""  # COLUMN_TYPE: int(10) unsigned, varchar(20), …
    charset: str | None = None
    nullable: bool = True
    collation: str | None = None  # COLLATION_NAME: a key's text is compared in it

    @property
    def expression(self) -> str:
        return datatypes.read_expression(self.name, self.data_type, self.charset)


def columns_of(cursor: Any, schema: str, table: str) -> tuple[ReadColumn, ...]:
    cursor.execute("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME, "
                   "IS_NULLABLE = 'YES', COLLATION_NAME FROM information_schema.COLUMNS WHERE "
                   "TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                   (schema, table))
    return tuple(ReadColumn(str(name), str(kind).lower(), str(full).lower(), charset,
                            bool(nullable), collation or None)
                 for name, kind, full, charset, nullable, collation in cursor.fetchall())


def mend(columns: Sequence[ReadColumn], rows: Iterable[tuple[Any, ...]]
         ) -> list[tuple[Any, ...]]:
    """Rows as the binlog decoder gives them: a BINARY value without the zero bytes that pad
    it, an empty binary string (or text read as its bytes: an sjis one) as ``''``, a text
    read as its bytes as :class:`~node.charsets.Encoded` (naming its charset), the zero
    TIMESTAMP(n) without its fraction (the
    server sends ``0000-00-00 00:00:00.000000``; a key read so was not the stream's)."""
    binary = [i for i, column in enumerate(columns)
              if column.data_type in ("binary", "varbinary", "tinyblob", "blob", "mediumblob",
                                      "longblob")
              or datatypes.read_as_bytes(column.data_type, column.charset)]
    zeros = [i for i, column in enumerate(columns)
             if column.data_type == "timestamp" and "(" in column.column_type]
    if not binary and not zeros:
        return list(rows)
    padded = {i for i in binary if columns[i].data_type == "binary"}
    texts = {i: columns[i].charset for i in binary
             if datatypes.read_as_bytes(columns[i].data_type, columns[i].charset)}
    out = []
    for row in rows:
        values = list(row)
        for i in binary:
            value = values[i]
            if isinstance(value, bytes):
                if i in padded:
                    value = value.rstrip(b"\0")
                elif i in texts and value:
                    value = Encoded(value, texts[i])  # as the binlog decoder gives it
                values[i] = value if value else ""
        for i in zeros:  # PyMySQL gives a TIMESTAMP as text only where it is the zero; a
            # request's key is text always (its JSON): any other value stays (every D of a
            # TIMESTAMP(n) key deleted the zero row instead of its own: a review)
            if isinstance(values[i], str) and values[i].startswith("0000-00-00"):
                values[i] = ZERO_TIMESTAMP
        out.append(tuple(values))
    return out


def typed(columns: Sequence[ReadColumn], keys: Iterable[Sequence[Any]]
          ) -> tuple[tuple[Any, ...], ...]:
    """Keys asked for (a request's JSON values: ``7``, ``"7"``, ``"2020-01-02"``) in the types
    the binlog decoder gives their columns, so that a key the stream also changes in the
    batch is one key to the merge: an integer as ``int``, a DECIMAL as ``Decimal``, a date,
    a datetime or a time as ``date``, ``datetime`` or ``timedelta``, text as ``str`` (a CHAR
    without trailing spaces). A value
    that does not convert (a zero date, ``"abc"`` for a number) stays as it was given."""
    return tuple(tuple(_typed(column.data_type, value)
                       for column, value in zip(columns, key, strict=True)) for key in keys)


def _typed(data_type: str, value: Any) -> Any:
    if isinstance(value, bytes) or value is None or isinstance(value, bool):
        return value
    try:
        if data_type in _INTEGERS:
            number = decimal.Decimal(str(value))
            return int(number) if number == number.to_integral_value() else value
        if data_type == "decimal":
            return decimal.Decimal(str(value))
        if data_type in ("float", "double"):
            return float(value)
        if data_type == "date":
            return datetime.date.fromisoformat(str(value))
        if data_type in ("datetime", "timestamp"):
            return datetime.datetime.fromisoformat(str(value))
        if data_type == "time":
            return _timedelta(str(value))
    except (ValueError, ArithmeticError):
        return value
    if data_type == "char":  # the binlog gives a CHAR without the spaces that pad it
        return str(value).rstrip(" ")
    return str(value) if data_type in datatypes.TEXT else value


_INTEGERS = datatypes.INTEGER | {"bit"}  # the decoder gives a BIT as a number
_TIME = re.compile(r"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?")


def _timedelta(text: str) -> datetime.timedelta:
    found = _TIME.fullmatch(text.strip())
    if found is None:
        raise ValueError(text)
    sign, hours, minutes, seconds, fraction = found.groups()
    value = datetime.timedelta(hours=int(hours), minutes=int(minutes), seconds=int(seconds),
                               microseconds=int((fraction or "0").ljust(6, "0")))
    return -value if sign else value


class Read(NamedTuple):
    """Rows read in one window for one table (a chunk, or keys asked for)."""

    window: int
    schema: str
    table: str
    keys: tuple[str, ...]  # the source key columns
    columns: tuple[str, ...]
    rows: bytes  # pickled list of row tuples (or the lines, see ``lines``)
    count: int
    label: str = ""  # what it was read for (a chunk, requests): for messages and progress
    first: int = 0  # the window's first event in its batch
    end: int = 0  # the place after its last event
    missing: tuple[tuple[Any, ...], ...] = ()  # keys asked for that the source lacks
    deletes: tuple[tuple[Any, ...], ...] = ()  # keys to delete on the target (free door D)
    # rows read as the source's LOAD DATA lines (node.extract.copylines): ``rows`` holds them
    lines: LinesPlan | None = None

    @property
    def place(self) -> tuple[int, str]:
        """The read among all of a batch's (its window's, and which chunk it is)."""
        return self.window, self.label


def select(cursor: Any, schema: str, table: str, columns: Sequence[ReadColumn], where: str,
           params: Sequence[Any]) -> list[tuple[Any, ...]]:
    sql = (f"SELECT {', '.join(column.expression for column in columns)} FROM "
           f"{qualified(schema, table)} WHERE {where}")
    try:
        cursor.execute(sql, params)
    except Exception as exc:  # pymysql's errors: said as the table's
        raise SourceError(f"cannot read {schema}.{table}: "
                          f"{exc.args[-1] if getattr(exc, 'args', None) else exc}") from None
    return mend(columns, cursor.fetchall())


def packed(rows: list[tuple[Any, ...]]) -> bytes:
    return pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)


def _key(values: dict[str, Any] | None, keys: tuple[str, ...]) -> tuple[Any, ...] | None:
    if values is None:
        return None
    return tuple(values.get(key) for key in keys)


def loose(key: Sequence[Any]) -> tuple[Any, ...]:
    """A key as a request's JSON and a row's decoded image both give it, compared loosely:
    numbers by value, text without case and trailing spaces (the collations that match
    more), bytes as text where they are, dates and times as ISO text. Used only to say
    which keys asked for were found (a request's note), never to choose what is written."""
    return tuple(_loose(value) for value in key)


def _loose(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float | decimal.Decimal):
        return decimal.Decimal(str(value)).normalize()
    if isinstance(value, datetime.timedelta | datetime.date | datetime.time):
        value = value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else \
            value.isoformat() if not isinstance(value, datetime.timedelta) else \
            time_text(value)
    if type(value) is Encoded:  # text read as its bytes: its characters (a request's JSON)
        value = value.decode(python_codec(value.charset), "replace")
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    if isinstance(value, str):
        try:
            return decimal.Decimal(value).normalize()  # a number given as text
        except decimal.InvalidOperation:
            pass
        if _FRACTION.search(value):  # 10:00:00.500000 and 10:00:00.5
            value = value.rstrip("0").rstrip(".")
        return value.rstrip(" ").casefold()
    return value


_FRACTION = re.compile(r"\d:\d\d\.\d+$")


def joined(reads: Sequence[Read], numbered: list[tuple[int, RowChange]],
           at_start: bool = False) -> list[tuple[int, RowChange]]:
    """The reads' rows as numbered changes at their windows' ends, without the keys the
    stream changed inside the windows; the deletes asked for at the windows' starts.

    ``at_start`` (a MySQL target): the rows go at the window's start, right after the
    deletes, before the stream's changes inside it. For every row kept that is the same:
    the stream did not change its key inside the window, so it held that row from the low
    watermark to the high one. Except for what the binlog does not carry: a parent the
    stream deletes (or moves) inside the window, after the read, took its children with it
    on the source by cascade — those child rows were read, and only a write before the
    parent's delete lets the target's own foreign key take them too (written at the end,
    they would stay)."""
    out: list[tuple[int, RowChange]] = []
    for read in reads:
        # A key asked deleted goes at the window's start, before every change the stream made
        # inside it: whatever the stream did to that row (or to one the table's collation takes
        # for it: 'e' and 'é', 'a' and 'A ') follows, as it did on the source, and the row
        # read (the source's, if it has one) goes in at the end. No key is compared here, so
        # none can be matched wrongly ('007' and '7' in a VARCHAR are two rows). A window
        # with no event of its own (first == end: a quiet source) has its start and its end
        # in one place, after the event before it: the deletes go right before the rows
        # there, never after them (the merge made the row read and its delete nothing).
        end = ((read.end - 1) << ROW_BITS) + INSIDE if read.end else INSIDE
        changed = changed_keys(read, numbered)
        rows = [after for after in (dict(zip(read.columns, row, strict=True))
                                    for row in pickle.loads(read.rows))
                if _key(after, read.keys) not in changed]
        if len(read.deletes) + len(rows) >= INSIDE:  # (their places would leave the window's)
            raise SourceError(
                f"a window of {qualified(read.schema, read.table)} read {len(rows):,} rows "
                f"and {len(read.deletes):,} deletes, more than a batch can place between two "
                f"events ({INSIDE - 1:,}). A snapshot chunk holds every row of one value of "
                "its key's first column, whatever snapshot_chunk_size: give the pair "
                "'key_columns:' naming the key's columns with one of many values first, "
                "apply, and copy the table again (or copy it in parts: setl snapshot "
                "--where)")
        # at the start (a MySQL target) the rows and deletes go right before the window's
        # first event, also in a window with no event of its own (after the event before
        # it): every place then has INSIDE set, which Load reads as "written unchecked"
        start = (read.first << ROW_BITS if at_start else min(read.first << ROW_BITS, end)) \
            - len(read.deletes) - (len(rows) if at_start else 0)
        for at, key in enumerate(read.deletes, start):
            before = dict(zip(read.keys, key, strict=True))
            out.append((at, RowChange(read.schema, read.table, ChangeType.DELETE, read.keys,
                                      before, None)))
        for at, after in enumerate(rows, start + len(read.deletes) if at_start else end):
            out.append((at, RowChange(read.schema, read.table, ChangeType.INSERT, read.keys,
                                      None, after)))
    return out


def changed_keys(read: Read, numbered: list[tuple[int, RowChange]], to_end: bool = False
                 ) -> set[tuple[Any, ...] | None]:
    """The keys (in the read's key columns) the stream changed inside the read's window
    (``to_end``: from its start to the end of the batch)."""
    low, high = read.first << ROW_BITS, PAST if to_end else read.end << ROW_BITS
    changed = set()
    for seq, change in numbered:
        if low <= seq < high and change.table == read.table and change.schema == read.schema:
            changed.add(_key(change.before, read.keys))
            changed.add(_key(change.after, read.keys))
    return changed
