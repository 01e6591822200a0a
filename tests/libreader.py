"""The reference the workers' row decoder is held against: python-mysql-replication's own
reading of rows events, with setl's corrections (``tests/librows.py`` for TIME,
dates and charsets; the mending below for BIT, ENUM, SET, the zero TIMESTAMP, the year 0000
and the values the library reads as None that are not NULL).

This was Select's reader until Select stopped decoding rows (issue 11); it stays, for tests
only, as the second opinion on every value.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.event import MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from node import charsets
from node.changes import ChangeType, RowChange
from shared.endpoint import Connection, connection_settings
from shared.model import BinlogPosition, DataSource
from tests import librows

librows.install()
KINDS = {WriteRowsEvent: ChangeType.INSERT, UpdateRowsEvent: ChangeType.UPDATE,
         DeleteRowsEvent: ChangeType.DELETE}
# Values the library reads as None that are not SQL NULL (its "none sources").
_NOT_NULL = {"empty set": "", "out of date range": "0000-00-00",
             "out of datetime range": "0000-00-00 00:00:00",
             "out of datetime2 range": "0000-00-00 00:00:00"}
_EPOCH = datetime.datetime(1970, 1, 1)
_TIMESTAMPS = (FIELD_TYPE.TIMESTAMP, FIELD_TYPE.TIMESTAMP2)


@dataclass
class Read:
    """One rows event as the library read it: its packet, table map and row changes."""

    data: bytes
    table: Any  # the library's Table
    checksum: bool
    changes: list[RowChange]


def _special(event: Any) -> tuple[Any, ...]:
    columns = event.columns
    return (frozenset(c.name for c in columns if c.type == FIELD_TYPE.YEAR),
            frozenset(c.name for c in columns if c.type == FIELD_TYPE.BIT),
            frozenset(c.name for c in columns if c.type in _TIMESTAMPS),
            tuple((c.name, c.character_set_name) for c in columns
                  if c.type == FIELD_TYPE.ENUM),
            tuple((c.name, tuple(c.set_values or ()), tuple(
                charsets.member(m, c.character_set_name) for m in c.set_values or ()))
                  for c in columns if c.type == FIELD_TYPE.SET))


def image(values: dict[str, Any], none_sources: dict[str, str],
          special: tuple[Any, ...]) -> dict[str, Any]:
    """A row image as the server would take it back: BIT as a number (the library gives a
    string of '0'/'1'), ENUM in its column's charset, SET as its text with the members in
    definition order, the zero TIMESTAMP as itself (the library gives the epoch), the year
    0000 as 0 (the library adds 1900 to the stored 0; no YEAR holds 1900)."""
    years, bits, timestamps, enums, sets = special
    for name in years:
        if values.get(name) == 1900:
            values[name] = 0
    for name, reason in none_sources.items():
        if values.get(name) is None and reason in _NOT_NULL:
            values[name] = _NOT_NULL[reason]
    for name in bits:
        if isinstance(values.get(name), str):
            values[name] = int(values[name], 2)
    for name in timestamps:
        if values.get(name) == _EPOCH:
            values[name] = "0000-00-00 00:00:00"
    for name, charset in enums:
        if isinstance(values.get(name), bytes):
            values[name] = charsets.member(values[name], charset)
    for name, members, texts in sets:
        value = values.get(name)
        if isinstance(value, set | frozenset):
            chosen = [text for member, text in zip(members, texts, strict=True)
                      if member in value]
            values[name] = (b"," if texts and isinstance(texts[0], bytes) else ",").join(
                chosen)
    return values


def changes_of(event: Any) -> list[RowChange]:
    """The row changes of a library rows event."""
    kind = KINDS[type(event)]
    key = event.primary_key
    keys = () if not key else (key,) if isinstance(key, str) else tuple(key)
    ts = int(event.timestamp) * 1000
    special = _special(event)
    if kind is ChangeType.UPDATE:
        return [RowChange(event.schema, event.table, kind, keys,
                          image(row["before_values"], row["before_none_sources"], special),
                          image(row["after_values"], row["after_none_sources"], special),
                          commit_ts_ms=ts) for row in event.rows]
    images = [image(row["values"], row["none_sources"], special) for row in event.rows]
    if kind is ChangeType.INSERT:
        return [RowChange(event.schema, event.table, kind, keys, None, one, commit_ts_ms=ts)
                for one in images]
    return [RowChange(event.schema, event.table, kind, keys, one, None, commit_ts_ms=ts)
            for one in images]


def read(source: DataSource, start: BinlogPosition, end: BinlogPosition,
         wants: Callable[[str], bool], server_id: int,
         on_read: Callable[[Read], None] | None = None) -> list[Read]:
    """Every rows event of a schema ``wants`` between ``start`` and ``end`` (file/pos), in
    binlog order (``on_read`` is told of each as it is read)."""
    settings = connection_settings(source)
    settings.pop("connect_timeout")
    stream = BinLogStreamReader(
        connection_settings=settings, server_id=server_id, blocking=True, resume_stream=True,
        log_file=start.file, log_pos=start.pos, freeze_schema=True, enable_logging=False,
        pymysql_wrapper=Connection,  # setl's (it takes the settings' pinned addresses)
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent, QueryEvent,
                     MariadbGtidEvent, RotateEvent])
    found: list[Read] = []
    try:
        while (stream.log_file, stream.log_pos or 0) < (end.file, end.pos) or \
                not stream.log_file:
            event = stream.fetchone()
            if event is None:
                raise AssertionError(f"the binlog stream ended before {end}")
            if type(event) in KINDS and wants(event.schema):
                found.append(Read(bytes(event.packet.packet._data),
                                  stream.table_map[event.table_id],
                                  bool(stream._BinLogStreamReader__use_checksum),
                                  changes_of(event)))
                if on_read is not None:
                    on_read(found[-1])
            elif isinstance(event, QueryEvent) and event.query.strip().upper() not in (
                    "BEGIN", "COMMIT"):
                stream.table_map.clear()  # as Select: no table id survives a DDL
    finally:
        stream.close()
    return found
