"""python-mysql-replication's row readers, corrected: the tests' reference reader
(``tests/libreader.py``) reads rows events with the library, and setl's own decoder in the
Spark workers (:mod:`node.extract.decodevalues`) is held against it. The library's 1.0.x
readers lose or garble values the server holds:

- **TIME with a fraction and a minus sign** (TIME2): the integer part and the fraction are
  read apart, so ``-23:45:56.7`` came out as ``-23:45:56.3``. Decoded here as the server does
  (``my_time_packed_from_binary``): one packed number, then sign, then parts.
- **Dates with a zero part or an impossible day** (DATE, DATETIME, DATETIME2):
  ``0001-00-00``, ``0000-00-00 14:02:10`` or, under ``ALLOW_INVALID_DATES``, ``2021-02-31``
  came out as the zero date (time of day lost) or stopped the reader. Python's ``date`` cannot
  hold them: they come as the text the server prints (``'0001-00-00'``,
  ``'0000-00-00 14:02:10.500'``), which the target takes back as the same value. Valid
  values stay ``date``/``datetime``.
- **Strings in charsets whose Python codec is not the server's**: MariaDB's ``latin1`` is
  cp1252 that keeps 0x81, 0x8D, 0x8F, 0x90 and 0x9D (as U+0081 …) where Python's cp1252
  fails; ``utf16``, ``utf32`` and ``ucs2`` are big-endian without a byte-order mark
  (:func:`node.charsets.charset_to_encoding`).

:func:`install` puts them on the library's ``RowsEvent`` (its private, name-mangled methods)
beside :func:`node.select.libevents.install`'s table-map and query-event readers.
"""

from __future__ import annotations

import datetime
from typing import Any

from pymysqlreplication.row_event import RowsEvent

from node.charsets import charset_to_encoding
from node.select import libevents

_TIMEF_INT_OFS = 0x800000
_TIMEF_OFS = 0x800000000000
_DATETIMEF_INT_OFS = 0x8000000000
_REPLACED = ("_RowsEvent__read_time2", "_RowsEvent__read_date", "_RowsEvent__read_datetime",
             "_RowsEvent__read_datetime2", "charset_to_encoding")


def time2(packed: int) -> datetime.timedelta:
    """A packed TIME (``(h << 36 | m << 30 | s << 24) + µs``, negated for a negative time)."""
    negative, packed = packed < 0, abs(packed)
    hms, micro = packed >> 24, packed % (1 << 24)
    value = datetime.timedelta(hours=(hms >> 12) % (1 << 10), minutes=(hms >> 6) % (1 << 6),
                               seconds=hms % (1 << 6), microseconds=micro)
    return -value if negative else value


def read_time2(event: Any, column: Any) -> datetime.timedelta:
    """TIME2 as the server reads it back (my_time_packed_from_binary)."""
    packet, fsp = event.packet, column.fsp
    if fsp >= 5:
        return time2(int.from_bytes(packet.read(6), "big") - _TIMEF_OFS)
    intpart = int.from_bytes(packet.read(3), "big") - _TIMEF_INT_OFS
    if fsp == 0:
        return time2(intpart << 24)
    size, unit = (1, 10_000) if fsp <= 2 else (2, 100)
    frac = int.from_bytes(packet.read(size), "big")
    if intpart < 0 and frac:  # negative values keep the fraction in reverse order
        intpart += 1
        frac -= 1 << (8 * size)
    return time2((intpart << 24) + frac * unit)


def _date(year: int, month: int, day: int) -> datetime.date | str:
    try:
        return datetime.date(year, month, day)
    except ValueError:  # 0000-00-00, 0001-00-00, 2021-02-31 (ALLOW_INVALID_DATES)
        return f"{year:04d}-{month:02d}-{day:02d}"


def _datetime(year: int, month: int, day: int, hour: int, minute: int, second: int,
              micro: int, fsp: int) -> datetime.datetime | str:
    try:
        return datetime.datetime(year, month, day, hour, minute, second, micro)
    except ValueError:
        text = f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
        return f"{text}.{micro:06d}"[:len(text) + 1 + fsp] if fsp else text


def read_date(event: Any) -> datetime.date | str:
    value = int.from_bytes(event.packet.read(3), "little")
    return _date(value >> 9, (value >> 5) % 16, value % 32)


def read_datetime(event: Any) -> datetime.datetime | str:
    """The old DATETIME: YYYYMMDDhhmmss as one number."""
    value = int.from_bytes(event.packet.read(8), "little")
    day, time = divmod(value, 1_000_000)
    return _datetime(day // 10_000, day // 100 % 100, day % 100, time // 10_000,
                     time // 100 % 100, time % 100, 0, 0)


def read_datetime2(event: Any, column: Any) -> datetime.datetime | str:
    packet, fsp = event.packet, column.fsp
    packed = int.from_bytes(packet.read(5), "big") - _DATETIMEF_INT_OFS
    micro = 0
    if fsp:
        size = (fsp + 1) // 2
        micro = int.from_bytes(packet.read(size), "big") * 100 ** (3 - size)
    ymd, hms = packed >> 17, packed % (1 << 17)
    year_month = ymd >> 5
    return _datetime(year_month // 13, year_month % 13, ymd % 32, hms >> 12, (hms >> 6) % 64,
                     hms % 64, micro, fsp)


def install() -> None:
    """Replace the library's row readers (idempotent), and its table-map and query-event
    readers as Select does."""
    libevents.install()
    missing = [name for name in _REPLACED if name not in RowsEvent.__dict__]
    assert not missing, f"python-mysql-replication has no {missing} to replace"
    RowsEvent._RowsEvent__read_time2 = read_time2  # type: ignore[attr-defined]
    RowsEvent._RowsEvent__read_date = read_date  # type: ignore[attr-defined]
    RowsEvent._RowsEvent__read_datetime = read_datetime  # type: ignore[attr-defined]
    RowsEvent._RowsEvent__read_datetime2 = read_datetime2  # type: ignore[attr-defined]
    RowsEvent.charset_to_encoding = staticmethod(charset_to_encoding)  # type: ignore[method-assign]
