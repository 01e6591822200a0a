"""Rows events read straight from the packet, without the binlog library's event objects.

For every event python-mysql-replication builds a packet wrapper and an event object
through several layers of keyword arguments, then reads each row column by column through
method calls; on ``oltp_write_only`` that was over a third of Select's CPU before a single
value was decoded. :func:`install` puts a factory in the library's place that looks at the
event type and table id first: a rows event of a table whose columns are all integers,
floats or strings (what :mod:`node.select.rowdecode` already reads from the bytes) becomes a
:class:`FastRows` that keeps the packet's bytes and decodes them only when Select wants the
table; a rows event of a schema no pair wants is skipped unread; a table map of a table id
already known is dropped unparsed; a MariaDB GTID or an XID event (two per transaction)
becomes the library's event class with just the fields Select reads, without the library's
per-event set-up. Every other event, and a rows event of any other table, goes to the
library as before. ``tests/integration/
test_rowdecode.py`` reads the schemas corpus' binlog both ways and finds every row change
equal.
"""

from __future__ import annotations

import struct
from typing import Any

from pymysqlreplication import binlogstream
from pymysqlreplication.constants import BINLOG
from pymysqlreplication.event import MariadbGtidEvent, XidEvent

from node.select import rowdecode
from shared.retl import SCHEMA as SYSTEM_SCHEMA

_ORIGINAL = binlogstream.BinLogPacketWrapper
ENABLED = True  # off: every event through the library (the differential test's baseline)
read_here = 0  # rows events read by this module (for tests and benchmarks)
boundaries_here = 0  # GTID and XID events read by this module (the same)
_V1 = {BINLOG.WRITE_ROWS_EVENT_V1: "I", BINLOG.UPDATE_ROWS_EVENT_V1: "U",
       BINLOG.DELETE_ROWS_EVENT_V1: "D"}
_V2 = {BINLOG.WRITE_ROWS_EVENT_V2: "I", BINLOG.UPDATE_ROWS_EVENT_V2: "U",
       BINLOG.DELETE_ROWS_EVENT_V2: "D"}
_KINDS = {**_V1, **_V2}
_HEADER = struct.Struct("<xIBIIIH")  # OK byte, timestamp, type, server id, size, next pos, flags
_BODY = 1 + 19  # where the event's body starts in the packet
_FAST = "_setl_fast_plan"  # on the library's Table: the plan, or None (the library reads it)
_GTID = struct.Struct("<QI")  # a MariaDB GTID event's body: sequence number, domain id
_XID = struct.Struct("<Q")
_PRESENT = "_setl_present"  # on the library's Table: columns-present bitmap -> its columns
PRESENT_KEPT = 64  # bitmaps kept per table map (a FULL image has one, MINIMAL a few)


class FastRows:
    """A rows event of a table :func:`plan` can read, its rows not yet decoded."""

    kind = ""

    def __init__(self, data: bytes, table: Any, plan: list[tuple[Any, ...]],
                 timestamp: int, use_checksum: bool, v2: bool) -> None:
        self.data, self.plan, self.timestamp = data, plan, timestamp
        self.schema, self.table = table.schema, table.table
        self.primary_key = table.data["primary_key"]
        self._end = len(data) - (4 if use_checksum else 0)
        self._start = _BODY + 8 + (2 if v2 else 0)
        self._seen = table.__dict__.setdefault(_PRESENT, {})  # this table map's bitmaps

    def _present(self, bitmap: bytes) -> tuple[list[tuple[Any, ...]], tuple[str, ...], int]:
        found = self._seen.get(bitmap)
        if found is None:
            found = _present(bitmap, self.plan)
            if len(self._seen) < PRESENT_KEPT:
                self._seen[bitmap] = found
        return found

    def images(self) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        """(before, after) of each row, values as the library (with setl's readers) gives."""
        data, plan = self.data, self.plan
        count, pos = _length(data, self._start)
        if count != len(plan):
            raise AssertionError(f"a rows event of {self.schema}.{self.table} has {count} "
                                 f"columns, its table map {len(plan)}")
        size = (count + 7) // 8
        present = self._present(data[pos:pos + size])
        pos += size
        present_after = present
        if self.kind == "U":
            present_after = self._present(data[pos:pos + size])
            pos += size
        rows: list[tuple[dict[str, Any] | None, dict[str, Any] | None]] = []
        while pos < self._end:
            first, pos = _image(data, pos, present, self)
            if self.kind == "U":
                after, pos = _image(data, pos, present_after, self)
                rows.append((first, after))
            elif self.kind == "I":
                rows.append((None, first))
            else:
                rows.append((first, None))
        if pos != self._end:
            raise AssertionError(f"a rows event of {self.schema}.{self.table} ends inside a "
                                 "row")
        return rows


class FastWrite(FastRows):
    kind = "I"


class FastUpdate(FastRows):
    kind = "U"


class FastDelete(FastRows):
    kind = "D"


EVENTS = (FastWrite, FastUpdate, FastDelete)
_CLASSES = {"I": FastWrite, "U": FastUpdate, "D": FastDelete}


class _Packet:
    """What the library's fetch loop reads of a packet wrapper, for a rows event read here
    (``event`` None: skipped, as the library skips an ignored schema's)."""

    def __init__(self, header: tuple[int, ...], event: FastRows | None) -> None:
        self.timestamp, self.event_type, self.server_id, self.event_size, self.log_pos, \
            self.flags = header
        self.event = event


def plan(table: Any) -> list[tuple[Any, ...]] | None:
    """rowdecode's plan for a table whose every column it reads from the bytes, else None."""
    found = table.__dict__.get(_FAST, False)
    if found is not False:
        return found  # type: ignore[no-any-return]
    made = rowdecode.table_plan(table)
    if made is not None and any(what == rowdecode.LIBRARY for _, what, *_ in made):
        made = None
    table.__dict__[_FAST] = made
    return made


def _wrapper(from_packet: Any, table_map: dict[int, Any], ctl_connection: Any,
             mysql_version: Any, use_checksum: bool, allowed_events: Any, only_tables: Any,
             ignored_tables: Any, only_schemas: Any, ignored_schemas: Any, *more: Any,
             **named: Any) -> Any:
    """The library's BinLogPacketWrapper, except for the events read here: rows events of
    plain tables, table maps already known, GTID and XID events."""
    data = from_packet._data
    if ENABLED and from_packet._position == 0:
        event_type = data[5]
        kind = _KINDS.get(event_type)
        if kind is not None:  # the commonest first: a rows event
            found = _rows(data, event_type, kind, table_map, use_checksum, allowed_events,
                          only_tables, ignored_tables, only_schemas, ignored_schemas,
                          named.get("post_header_lengths") if "post_header_lengths" in named
                          else (more[-1] if more else None))
            if found is not None:
                return found
        elif event_type in _BOUNDARIES and len(data) >= _BODY + _BOUNDARIES[event_type]:
            return _Packet(_HEADER.unpack_from(data), _boundary(data, allowed_events))
        elif event_type == BINLOG.TABLE_MAP_EVENT and more and more[0] is True and \
                int.from_bytes(data[_BODY:_BODY + 6], "little") in table_map:
            # a table id already mapped, its schema frozen: the library would parse the
            # header only to drop the event (TableMapEvent._processed False); drop it unparsed
            return _Packet(_HEADER.unpack_from(data), None)
    return _ORIGINAL(from_packet, table_map, ctl_connection, mysql_version, use_checksum,
                     allowed_events, only_tables, ignored_tables, only_schemas,
                     ignored_schemas, *more, **named)


def _rows(data: bytes, event_type: int, kind: str, table_map: dict[int, Any],
          use_checksum: bool, allowed_events: Any, only_tables: Any, ignored_tables: Any,
          only_schemas: Any, ignored_schemas: Any, lengths: Any) -> _Packet | None:
    """A rows event read here (or skipped, its schema unwanted), or None: the library's."""
    if len(data) <= _BODY + 8 or FastWrite not in allowed_events or \
            only_tables is not None or ignored_tables is not None or only_schemas is not None:
        return None
    table = table_map.get(int.from_bytes(data[_BODY:_BODY + 6], "little"))
    if table is None:
        return None
    v2 = event_type in _V2
    if _post_header(lengths, event_type) != (10 if v2 else 8) or \
            (v2 and int.from_bytes(data[_BODY + 8:_BODY + 10], "little") != 2):
        return None
    header = _HEADER.unpack_from(data)
    if ignored_schemas is not None and table.schema in ignored_schemas:
        return _Packet(header, None)
    found = plan(table) if table.schema != SYSTEM_SCHEMA else None  # free door: library
    if found is None:
        return None
    global read_here
    read_here += 1
    return _Packet(header, _CLASSES[kind](data, table, found, header[0], use_checksum, v2))


def _boundary(data: bytes, allowed_events: Any) -> Any:
    """A transaction's start (MariaDB GTID) or commit (XID) as the library's event class
    with only what Select reads of it (``gtid``, ``xid``, ``timestamp``), built without the
    library's per-event set-up; None (skipped) when the stream does not ask for it."""
    global boundaries_here
    boundaries_here += 1
    header = _HEADER.unpack_from(data)
    if data[5] == BINLOG.XID_EVENT:
        if XidEvent not in allowed_events:
            return None
        event: Any = XidEvent.__new__(XidEvent)
        event.xid = _XID.unpack_from(data, _BODY)[0]
    else:
        if MariadbGtidEvent not in allowed_events:
            return None
        event = MariadbGtidEvent.__new__(MariadbGtidEvent)
        event.gtid_seq_no, event.domain_id = _GTID.unpack_from(data, _BODY)
        event.server_id, event.flags = header[2], data[_BODY + 12]
        event.gtid = f"{event.domain_id}-{event.server_id}-{event.gtid_seq_no}"
    event.timestamp, event.event_type, event.event_size = header[0], data[5], header[3]
    return event


_BOUNDARIES = {BINLOG.XID_EVENT: 8, BINLOG.MARIADB_GTID_EVENT: 13}  # type: body bytes read


def _post_header(lengths: Any, event_type: int) -> int | None:
    """The post-header length the server declares for the type (None: the default)."""
    if not lengths or event_type - 1 >= len(lengths):
        return 10 if event_type in _V2 else 8
    return int(lengths[event_type - 1])


def _length(data: bytes, pos: int) -> tuple[int, int]:
    """A length-encoded integer and the position after it."""
    first = data[pos]
    if first < 251:
        return first, pos + 1
    size = {252: 2, 253: 3, 254: 8}[first]
    return int.from_bytes(data[pos + 1:pos + 1 + size], "little"), pos + 1 + size


def _present(bitmap: bytes, plan: list[tuple[Any, ...]]
             ) -> tuple[list[tuple[Any, ...]], tuple[str, ...], int]:
    """The plan's columns in a row image (by the event's columns-present bitmap); when some
    are not in it (a MINIMAL image), every column's name, in order, for the image to start
    from None as the library's does; and the size of each row's NULL bitmap."""
    inside = [entry for i, entry in enumerate(plan) if bitmap[i >> 3] & (1 << (i & 7))]
    every = tuple(entry[0] for entry in plan) if len(inside) < len(plan) else ()
    return inside, every, (len(inside) + 7) // 8


def _image(data: bytes, pos: int,
           present: tuple[list[tuple[Any, ...]], tuple[str, ...], int],
           event: FastRows) -> tuple[dict[str, Any], int]:
    """One row image from ``pos``: as :func:`node.select.rowdecode.read_column_data` reads it."""
    columns, every, null_size = present
    nulls = data[pos:pos + null_size]
    pos += null_size
    values: dict[str, Any] = dict.fromkeys(every) if every else {}
    for null_index, (name, what, how, _column, _unsigned) in enumerate(columns):
        if nulls[null_index >> 3] & (1 << (null_index & 7)):
            values[name] = None
        elif what == rowdecode.FIXED:
            values[name] = how.unpack_from(data, pos)[0]
            pos += how.size
        else:
            values[name], pos = rowdecode.read_text(data, pos, how, "strict", event, name)
    return values, pos


def install() -> None:
    binlogstream.BinLogPacketWrapper = _wrapper  # type: ignore[misc]
