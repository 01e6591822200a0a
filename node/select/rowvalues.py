"""Exact row values from the binlog: the readers python-mysql-replication gets wrong, replaced.

Part of the binlog adapter (:mod:`node.select.binlog`); nothing else touches the library. Its 1.0.x
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
- **Statements in a client charset other than UTF-8** (query events): the text was decoded
  as UTF-8 with backslash escapes for other bytes, so a latin1 ``DEFAULT 'é'`` became
  ``'\\xe9'``. The statement's bytes are kept (``query_bytes``) for :mod:`node.ddlsession`
  to decode in the session's charset.
- **Strings in charsets whose Python codec is not the server's**: MariaDB's ``latin1`` is
  cp1252 that keeps 0x81, 0x8D, 0x8F, 0x90 and 0x9D (as U+0081 …) where Python's cp1252
  fails; ``utf16``, ``utf32`` and ``ucs2`` are big-endian without a byte-order mark, where
  Python's ``utf16``/``utf32`` guess little-endian. ENUM and SET members were decoded as
  UTF-8 whatever their charset (a latin1 ``'é'`` became ``''``): they stay bytes here and
  :func:`member` decodes them with their column's charset.

:func:`install` puts these readers on the library's ``RowsEvent`` (its private,
name-mangled methods); it checks that they exist, so a library upgrade that renames them
stops setl at start with a clear error instead of decoding with the old bugs.
"""

from __future__ import annotations

import datetime
from typing import Any

from pymysqlreplication.event import BinLogEvent, QueryEvent
from pymysqlreplication.row_event import RowsEvent, TableMapEvent

from node.charsets import charset_to_encoding, member  # noqa: F401 - member: binlog's
from shared.errors import SetlError

_TIMEF_INT_OFS = 0x800000
_TIMEF_OFS = 0x800000000000
_DATETIMEF_INT_OFS = 0x8000000000
_REPLACED = ("_RowsEvent__read_time2", "_RowsEvent__read_date", "_RowsEvent__read_datetime",
             "_RowsEvent__read_datetime2", "charset_to_encoding")


def read_type_values(event: Any, length: int) -> list[list[bytes]] | None:
    """The members of each ENUM or SET column of a table map, as bytes."""
    packet = event.packet
    result = []
    end = packet.read_bytes + length
    while packet.read_bytes < end:
        count = packet.read_length_coded_binary()
        result.append([packet.read_variable_length_string() for _ in range(count)])
    return result or None


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


def read_query_event(event: Any, from_packet: Any, event_size: int, table_map: Any,
                     ctl_connection: Any, **kwargs: Any) -> None:
    """A query event (the library's ``QueryEvent.__init__``, keeping the statement's bytes):
    post-header, status variables (the session: the library's reader of each), schema,
    statement."""
    BinLogEvent.__init__(event, from_packet, event_size, table_map, ctl_connection, **kwargs)
    packet = event.packet
    event.slave_proxy_id = packet.read_uint32()
    event.execution_time = packet.read_uint32()
    event.schema_length = packet.read_uint8()
    event.error_code = packet.read_uint16()
    event.status_vars_length = packet.read_uint16()
    post_header = event._advance_to_payload(13)
    end = packet.read_bytes + event.status_vars_length
    while packet.read_bytes < end:
        event._read_status_vars_value_for_key(packet.read_uint8())
    event.schema = packet.read(event.schema_length)
    packet.advance(1)
    length = event_size - post_header - event.status_vars_length - event.schema_length - 1
    if length < 0:
        raise SetlError(f"a query event of {event_size} bytes is shorter than its headers say "
                        f"({post_header} + {event.status_vars_length} + {event.schema_length})")
    event.query_bytes = packet.read(length)
    # as the library has it, for BEGIN/COMMIT and logs; a DDL is decoded by node.ddlsession
    event.query = event.query_bytes.decode("utf-8", errors="backslashreplace")


_LIBRARY_ENCODING = RowsEvent.__dict__["charset_to_encoding"].__func__ \
    if isinstance(RowsEvent.__dict__.get("charset_to_encoding"), staticmethod) else None


_installed = False


def install() -> None:
    """Replace the library's readers (idempotent); refuse a library that lacks them."""
    global _installed
    if _installed:
        return
    missing = [name for name in _REPLACED if name not in RowsEvent.__dict__]
    missing += [] if "_read_type_values" in TableMapEvent.__dict__ else ["_read_type_values"]
    missing += [name for name in ("_advance_to_payload", "_read_status_vars_value_for_key")
                if not hasattr(QueryEvent, name)]
    if missing or _LIBRARY_ENCODING is None:
        raise SetlError(
            "the installed python-mysql-replication has no "
            f"{', '.join(missing) or 'charset_to_encoding'} to replace; setl needs "
            "mysql-replication 1.0.x (pip install 'mysql-replication>=1.0.9,<1.1')")
    _installed = True
    RowsEvent._RowsEvent__read_time2 = read_time2  # type: ignore[attr-defined]
    RowsEvent._RowsEvent__read_date = read_date  # type: ignore[attr-defined]
    RowsEvent._RowsEvent__read_datetime = read_datetime  # type: ignore[attr-defined]
    RowsEvent._RowsEvent__read_datetime2 = read_datetime2  # type: ignore[attr-defined]
    RowsEvent.charset_to_encoding = staticmethod(charset_to_encoding)  # type: ignore[method-assign]
    TableMapEvent._read_type_values = read_type_values  # type: ignore[method-assign]
    QueryEvent.__init__ = read_query_event  # type: ignore[method-assign]
