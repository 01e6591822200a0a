"""Readers of the binlog values that are not read inline: decimals, dates and times, ENUM
and SET. Each is made once per column (its precision, fractional digits or members worked
out then) and returns ``(size in the row, reader(data, pos))``.

They give what Select's reader gives (python-mysql-replication 1.0.x with
``tests/librows.py``' corrections and :mod:`node.select.binlog`'s mending), which
this module may not import: the code of the corrected readers is repeated here, and
``tests/integration/test_decode.py`` holds the two side by side.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from node import charsets
from node.charsets import Encoded

if TYPE_CHECKING:
    from node.extract.decode import ColumnSpec

_EPOCH = datetime.datetime(1970, 1, 1)
_utcfromtimestamp = datetime.datetime.utcfromtimestamp
_ZERO_TIMESTAMP = "0000-00-00 00:00:00"  # what TIMESTAMP's zero is (the library: the epoch)
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
Reader = tuple[int, Callable[[bytes, int], Any]]


class Undecodable(Exception):  # translated to SourceError by node.extract.decode
    """A value of this column cannot be decoded exactly; carries why and what to do."""


class PastEnd(Exception):  # translated to SourceError by node.extract.decode
    """The rows did not end where the event does; carries by how many bytes."""


def newdecimal(column: ColumnSpec) -> tuple[int, Callable[[bytes, int], decimal.Decimal]]:
    """DECIMAL(precision, decimals): groups of nine digits in four big-endian bytes, the
    leftover digits in fewer, the sign in the first bit, a negative value's bytes inverted.
    Built as the library builds it (its text, then Decimal), so the exponent is the same."""
    precision, decimals = column.precision, column.decimals
    integral = precision - decimals
    whole_int, whole_frac = integral // 9, decimals // 9
    left_int, left_frac = integral - whole_int * 9, decimals - whole_frac * 9
    head, tail = _DIG2BYTES[left_int], _DIG2BYTES[left_frac]
    size = head + 4 * (whole_int + whole_frac) + tail
    Decimal = decimal.Decimal

    def read(d: bytes, p: int) -> decimal.Decimal:
        raw = bytearray(d[p:p + size])
        first = raw[0]
        mask, text = (0, "") if first & 0x80 else (-1, "-")
        raw[0] = first ^ 0x80
        o = head
        if head:
            text += str(int.from_bytes(raw[:head], "big", signed=True) ^ mask)
        for _ in range(whole_int):
            text += f"{int.from_bytes(raw[o:o + 4], 'big', signed=True) ^ mask:09d}"
            o += 4
        text += "."
        for _ in range(whole_frac):
            text += f"{int.from_bytes(raw[o:o + 4], 'big', signed=True) ^ mask:09d}"
            o += 4
        if tail:
            text += f"{int.from_bytes(raw[o:o + tail], 'big', signed=True) ^ mask:0{left_frac}d}"
        return Decimal(text)
    return size, read


def _date(year: int, month: int, day: int) -> datetime.date | str:
    try:
        return datetime.date(year, month, day)
    except ValueError:  # 0000-00-00, 0001-00-00, 2021-02-31 (ALLOW_INVALID_DATES): as text
        return f"{year:04d}-{month:02d}-{day:02d}"


def _datetime(year: int, month: int, day: int, hour: int, minute: int, second: int,
              micro: int, fsp: int) -> datetime.datetime | str:
    try:
        return datetime.datetime(year, month, day, hour, minute, second, micro)
    except ValueError:
        text = f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
        return f"{text}.{micro:06d}"[:len(text) + 1 + fsp] if fsp else text


def date(column: ColumnSpec) -> Reader:
    def read(d: bytes, p: int) -> datetime.date | str:
        value = d[p] | d[p + 1] << 8 | d[p + 2] << 16
        return _date(value >> 9, (value >> 5) % 16, value % 32)
    return 3, read


_OLD_FRACTION = ("a pre-5.6 {0} (made with mysql56_temporal_format=OFF) holds a value no "
                 "{0} without a fraction can hold: it is a {0}(n), whose fraction the binlog "
                 "does not describe (Select's reader misreads it too); convert the column with "
                 "ALTER TABLE … FORCE under mysql56_temporal_format=ON")


def old_time(column: ColumnSpec) -> Reader:
    """The pre-5.6 TIME: hhmmss as one number. A negative one (Select's reader reads it as a
    huge positive time) and impossible parts (a TIME(n)'s bytes) fail."""
    def read(d: bytes, p: int) -> datetime.timedelta:
        value = d[p] | d[p + 1] << 8 | d[p + 2] << 16
        if value >= 0x800000:
            raise Undecodable("a negative TIME in the pre-5.6 format, which Select's reader "
                              "misreads too; convert the column with ALTER TABLE … FORCE "
                              "under mysql56_temporal_format=ON")
        hours, minutes, seconds = value // 10000, value % 10000 // 100, value % 100
        if minutes > 59 or seconds > 59 or hours > 838:
            raise Undecodable(_OLD_FRACTION.format("TIME"))
        return datetime.timedelta(hours=hours, minutes=minutes, seconds=seconds)
    return 3, read


def old_datetime(column: ColumnSpec) -> Reader:
    """The pre-5.6 DATETIME: YYYYMMDDhhmmss as one number (parts out of range: the bytes of
    a DATETIME(n), which fail)."""
    def read(d: bytes, p: int) -> datetime.datetime | str:
        day, time = divmod(int.from_bytes(d[p:p + 8], "little"), 1_000_000)
        year, month, mday = day // 10_000, day // 100 % 100, day % 100
        hour, minute, second = time // 10_000, time // 100 % 100, time % 100
        if year > 9999 or month > 12 or mday > 31 or hour > 23 or minute > 59 or second > 59:
            raise Undecodable(_OLD_FRACTION.format("DATETIME"))
        return _datetime(year, month, mday, hour, minute, second, 0, 0)
    return 8, read


def old_timestamp(column: ColumnSpec) -> Reader:
    def read(d: bytes, p: int) -> datetime.datetime | str:
        seconds = int.from_bytes(d[p:p + 4], "little")
        return _utcfromtimestamp(seconds) if seconds else _ZERO_TIMESTAMP
    return 4, read


def _fraction(fsp: int) -> tuple[int, int]:
    """Bytes of a fraction of ``fsp`` digits and the factor to microseconds."""
    size = (fsp + 1) // 2
    return size, 100 ** (3 - size)


def timestamp2(column: ColumnSpec) -> Reader:
    """Seconds since the epoch (big-endian, unsigned: MariaDB 11.5+ stores up to
    2106-02-07, and a signed read made 2038-01-19 03:14:08 1901-12-13; no server stores one
    before 1970) and the fraction (signed; for an odd ``fsp`` its last stored digit
    dropped)."""
    fsp = column.fsp
    size = (fsp + 1) // 2 if fsp in range(1, 7) else 0
    odd, scale = fsp % 2, 10 ** (6 - fsp)

    def read(d: bytes, p: int) -> datetime.datetime | str:
        seconds = int.from_bytes(d[p:p + 4], "big")
        micro = 0
        if size:
            micro = int.from_bytes(d[p + 4:p + 4 + size], "big", signed=True)
            if odd:
                micro = int(micro / 10)
            micro *= scale
        value = _utcfromtimestamp(seconds)
        if micro > 0:
            value = value.replace(microsecond=micro)
        return _ZERO_TIMESTAMP if value == _EPOCH else value
    return 4 + size, read


def datetime2(column: ColumnSpec) -> Reader:
    fsp = column.fsp
    size, scale = _fraction(fsp) if fsp else (0, 0)

    def read(d: bytes, p: int) -> datetime.datetime | str:
        packed = int.from_bytes(d[p:p + 5], "big") - 0x8000000000
        micro = int.from_bytes(d[p + 5:p + 5 + size], "big") * scale if size else 0
        ymd, hms = packed >> 17, packed % (1 << 17)
        year_month = ymd >> 5
        return _datetime(year_month // 13, year_month % 13, ymd % 32, hms >> 12,
                         (hms >> 6) % 64, hms % 64, micro, fsp)
    return 5 + size, read


def packed_time(packed: int) -> datetime.timedelta:
    """A packed TIME (``(h << 36 | m << 30 | s << 24) + µs``, negated for a negative time)."""
    negative, packed = packed < 0, abs(packed)
    hms, micro = packed >> 24, packed % (1 << 24)
    value = datetime.timedelta(hours=(hms >> 12) % (1 << 10), minutes=(hms >> 6) % (1 << 6),
                               seconds=hms % (1 << 6), microseconds=micro)
    return -value if negative else value


def time2(column: ColumnSpec) -> Reader:
    """TIME as the server reads it back (my_time_packed_from_binary)."""
    fsp = column.fsp
    if fsp >= 5:
        def read6(d: bytes, p: int) -> datetime.timedelta:
            return packed_time(int.from_bytes(d[p:p + 6], "big") - 0x800000000000)
        return 6, read6
    size, unit = (0, 0) if fsp == 0 else (1, 10_000) if fsp <= 2 else (2, 100)

    def read(d: bytes, p: int) -> datetime.timedelta:
        whole = int.from_bytes(d[p:p + 3], "big") - 0x800000
        if not size:
            return packed_time(whole << 24)
        frac = int.from_bytes(d[p + 3:p + 3 + size], "big")
        if whole < 0 and frac:  # a negative value keeps its fraction in reverse order
            whole += 1
            frac -= 1 << (8 * size)
        return packed_time((whole << 24) + frac * unit)
    return 3 + size, read


def enum(column: ColumnSpec) -> Reader:
    """An ENUM's index into its members, each decoded in the column's charset once; index 0
    is the value an invalid string gets (``''``)."""
    members = column.enum_values
    size = column.size
    if members is None:
        return size, _fails("the table map lists no members of this ENUM; set "
                            "binlog_row_metadata=FULL on the source")
    values: list[Any] = [""]
    lazy = False
    for member in members:
        try:
            values.append(charsets.member(member, column.charset))
        except UnicodeDecodeError:  # decoded (and failing) only when a row holds it
            values.append(member)
            lazy = True
    table = tuple(values)

    def read(d: bytes, p: int) -> Any:
        index = int.from_bytes(d[p:p + size], "little")
        if index >= len(table):
            raise Undecodable(f"ENUM index {index} is past its {len(members)} members; the "
                              "table map does not match the row")
        value = table[index]
        return charsets.member(value, column.charset) if lazy and index else value
    return size, read


def set_(column: ColumnSpec) -> Reader:
    """A SET as its text: the members whose bits are set, in definition order, joined by
    commas, each in the column's charset ('' when none is set)."""
    members, size = column.set_values, column.size
    if members is None:
        return size, _fails("the table map lists no members of this SET; set "
                            "binlog_row_metadata=FULL on the source")
    try:
        texts = tuple(charsets.member(m, column.charset) for m in members)
    except UnicodeDecodeError as exc:  # Select's reader fails on every row of the table too
        return size, _fails(f"a member of this SET is not valid in its charset: {exc}")
    comma: Any = b"," if texts and isinstance(texts[0], bytes) else ","
    encoded = texts[0].charset if texts and type(texts[0]) is Encoded else None
    known: dict[int, Any] = {}

    def read(d: bytes, p: int) -> Any:
        mask = int.from_bytes(d[p:p + size], "little")
        found = known.get(mask)
        if found is None:
            chosen = {m for bit, m in enumerate(members) if mask & (1 << bit)}
            found = comma.join([t for m, t in zip(members, texts, strict=True)
                                if m in chosen]) if chosen else ""
            if encoded is not None and found:  # (joined: bytes, its charset named again)
                found = Encoded(found, encoded)
            if len(known) < 4096:
                known[mask] = found
        return found
    return size, read


def _fails(why: str) -> Callable[[bytes, int], Any]:
    def read(d: bytes, p: int) -> Any:
        raise Undecodable(why)
    return read
