"""The one adapter around python-mysql-replication.

It reads the binlog from a position in its own thread and hands over whole committed
transactions (:class:`Transaction` of :class:`RowChange`) through a bounded queue; nothing
outside this module sees a library event class.
"""

from __future__ import annotations

import datetime
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.event import (
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from node import charsets, ddlsession
from node.changes import ChangeType, RowChange, Session, Transaction
from node.ddl import database_options, parse_database
from node.ddl import parse as parse_ddl
from node.select import fastrows, rowdecode, rowvalues
from node.select.source import LOST_POSITION_REMEDY
from shared.endpoint import connect, connection_settings
from shared.errors import PositionLostError, SetlError, SourceError
from shared.model import BinlogPosition, DataSource
from shared.retl import BUFFER_TABLE
from shared.retl import SCHEMA as SYSTEM_SCHEMA  # the free door's buffer, the loop marks

MARK_TABLE = (SYSTEM_SCHEMA, "retl_mark")
BINLOG_POSITION_REFUSED = 1236  # ER_MASTER_FATAL_ERROR_READING_BINLOG

log = logging.getLogger("setl.node.select.binlog")
rowvalues.install()  # the library's TIME, date and charset readers, made exact
rowdecode.install()  # and its row reader, made faster
fastrows.install()  # and most rows events read without its event objects at all
_EVENTS = [RotateEvent, MariadbGtidEvent, GtidEvent, QueryEvent, XidEvent, WriteRowsEvent,
           UpdateRowsEvent, DeleteRowsEvent, *fastrows.EVENTS]
_ROW_TYPES = {WriteRowsEvent: ChangeType.INSERT, UpdateRowsEvent: ChangeType.UPDATE,
              DeleteRowsEvent: ChangeType.DELETE, fastrows.FastWrite: ChangeType.INSERT,
              fastrows.FastUpdate: ChangeType.UPDATE, fastrows.FastDelete: ChangeType.DELETE}


class StreamEnded(Exception):  # a signal put on the queue, not raised to users
    """The reader stopped; carries the error that stopped it, if any."""

    def __init__(self, error: BaseException | None) -> None:
        super().__init__(str(error) if error else "stopped")
        self.error = error


# Values the library reads as None that are not SQL NULL (its "none sources").
_NOT_NULL = {"empty set": "", "out of date range": "0000-00-00",
             "out of datetime range": "0000-00-00 00:00:00",
             "out of datetime2 range": "0000-00-00 00:00:00"}


_EPOCH = datetime.datetime(1970, 1, 1)
_TIMESTAMPS = (FIELD_TYPE.TIMESTAMP, FIELD_TYPE.TIMESTAMP2)


@dataclass(frozen=True)
class _Special:
    """Columns of one rows event whose library values need mending."""

    bits: frozenset[str]
    timestamps: frozenset[str]
    enums: tuple[tuple[str, str | None], ...] = ()  # ENUM columns and their charsets
    sets: tuple[tuple[str, tuple[bytes, ...], tuple[str | bytes, ...]], ...] = ()

    @classmethod
    def of(cls, event: Any) -> _Special:
        columns = event.columns
        return cls(frozenset(c.name for c in columns if c.type == FIELD_TYPE.BIT),
                   frozenset(c.name for c in columns if c.type in _TIMESTAMPS),
                   tuple((c.name, c.character_set_name) for c in columns
                         if c.type == FIELD_TYPE.ENUM),
                   tuple((c.name, tuple(c.set_values or ()), tuple(
                       charsets.member(m, c.character_set_name) for m in c.set_values or ()))
                         for c in columns if c.type == FIELD_TYPE.SET))


def _image(values: dict[str, Any], none_sources: dict[str, str],
           special: _Special) -> dict[str, Any]:
    """A row image as the server would take it back: BIT as a number (the library gives a
    string of '0'/'1'), ENUM in its column's charset, SET as its text with the members in
    definition order (the library gives a Python set of members as bytes, which cannot be
    part of a key, and None for the empty set), the zero TIMESTAMP as itself (the library
    gives the epoch, which TIMESTAMP cannot hold). Dates with zero parts and negative TIMEs
    with a fraction come exact from :mod:`node.select.rowvalues`. TIMESTAMPs come in UTC; Load
    writes them with time_zone '+00:00'."""
    for name, reason in none_sources.items():
        if values.get(name) is None and reason in _NOT_NULL:
            values[name] = _NOT_NULL[reason]
    for name in special.bits:
        if isinstance(values.get(name), str):
            values[name] = int(values[name], 2)
    for name in special.timestamps:
        if values.get(name) == _EPOCH:
            values[name] = "0000-00-00 00:00:00"
    for name, charset in special.enums:
        if isinstance(values.get(name), bytes):
            values[name] = charsets.member(values[name], charset)
    for name, members, texts in special.sets:
        value = values.get(name)
        if isinstance(value, set | frozenset):
            chosen = [text for member, text in zip(members, texts, strict=True)
                      if member in value]
            values[name] = (b"," if texts and isinstance(texts[0], bytes) else ",").join(
                chosen)  # type: ignore[arg-type]  # one charset: all bytes or all text
    return values


def _buffer_requests(kind: ChangeType, rows: list[dict[str, Any]]) -> list[RowChange]:
    """Per-instance free-door requests: inserts without a CHANNEL_ID (rows with one are
    central requests, served by their pipeline's polling; cleanup deletes are not requests)."""
    if kind is not ChangeType.INSERT:
        return []
    return [RowChange(*BUFFER_TABLE, kind, ("ID",), None, dict(row["values"]))
            for row in rows if not row["values"].get("CHANNEL_ID")]


def gtid_start(server_version: str, gtid: str) -> dict[str, Any]:
    """The library's arguments for a dump from ``gtid``: MariaDB's domain-server-sequence
    position or MySQL's executed GTID set, told apart by the server's version string."""
    return {"auto_position": gtid, "is_mariadb": "mariadb" in server_version.lower()}


def _keys(primary_key: Any) -> tuple[str, ...]:
    if not primary_key:
        return ()
    return (primary_key,) if isinstance(primary_key, str) else tuple(primary_key)


class _UnwantedSchemas:
    """The library's ``ignored_schemas``, asked ``schema in …`` for every table map and rows
    event: a schema no pair (and no system table) can want. Its table maps are dropped
    before their columns are parsed, and its rows events right after their table id."""

    def __init__(self, wants_schema: Callable[[str], bool]) -> None:
        self._wants = wants_schema
        self._known: dict[str, bool] = {}

    def __contains__(self, schema: object) -> bool:
        unwanted = self._known.get(schema)  # type: ignore[call-overload]
        if unwanted is None:
            unwanted = self._known[schema] = not (  # type: ignore[index]
                schema == SYSTEM_SCHEMA or self._wants(str(schema)))
        return unwanted


class BinlogReader:
    """Reads committed transactions after ``start`` in its own thread; :meth:`take` hands
    them over in binlog order.

    Table maps are parsed once per table id (the server gives a table a new id whenever its
    definition changes, and the cache is cleared on every DDL and binlog rotation), and rows
    events of schemas no pair wants are dropped before they are parsed: a pipeline crosses a
    busy neighbour's stretch of the binlog at the speed of reading event headers.
    """

    def __init__(self, source: DataSource, server_id: int, start: BinlogPosition,
                 wants: Callable[[str, str], bool], wants_schema: Callable[[str], bool],
                 loop_channel: str | None = None, ddl: bool = True,
                 queue_size: int = 10_000) -> None:
        self.source, self.server_id, self.start = source, server_id, start
        self.out: queue.Queue[Transaction | StreamEnded] = queue.Queue(maxsize=queue_size)
        self.ddl = ddl  # DDL statements as changes (ddl_sync); else they only move the position
        self._unwanted = _UnwantedSchemas(wants_schema)
        # a two-way channel: transactions carrying its own loop mark were loaded by the
        # opposite pipeline and are dropped (else every change would ping-pong for ever)
        self.loop_channel = loop_channel
        # the free door's per-instance requests (inserts into retl.retl_buffer) come too
        system = {BUFFER_TABLE} if loop_channel is None else {BUFFER_TABLE, MARK_TABLE}
        self.wants = lambda schema, table: (schema, table) in system or wants(schema, table)
        self._stop = threading.Event()
        self._facts = ddlsession.SourceFacts(lambda: connect(source), f"source {source.name}")
        self._databases: dict[str, tuple[str, str]] = {}  # default (charset, collation)
        self._specials: dict[int, tuple[Any, _Special]] = {}  # by table id, with its map
        self._stream: BinLogStreamReader | None = None
        self._thread = threading.Thread(target=self._run, name=f"binlog-{source.name}",
                                        daemon=True)

    def begin(self) -> None:
        if self.ddl:  # databases' defaults where the reader starts; DDL keeps them up to date
            self._databases = self._facts.databases()
        self._thread.start()

    @property
    def backlog(self) -> int:
        return self.out.qsize()

    def take(self, timeout_s: float) -> Transaction | None:
        """The next transaction, or None when none came within ``timeout_s``; raises the
        error that stopped the reader (and again on every later call)."""
        try:
            item = self.out.get(timeout=max(timeout_s, 0.001))
        except queue.Empty:
            return None
        if isinstance(item, StreamEnded):
            self.out.put(item)  # stays the last word for any later call
            raise item.error or SourceError(f"the binlog reader of {self.source.name} stopped")
        return item

    def stop(self) -> None:
        self._stop.set()
        self._close()
        self._thread.join(timeout=5)

    def _open(self) -> BinLogStreamReader:
        settings = connection_settings(self.source)
        settings.pop("connect_timeout")
        # is_mariadb only with a GTID: with it the library ignores file/pos and starts at the
        # oldest binlog. A file/pos dump works on MariaDB as on MySQL.
        position: dict[str, Any] = {"log_file": self.start.file, "log_pos": self.start.pos}
        if not self.start.file and self.start.gtid:
            with connect(self.source) as conn, conn.cursor() as cursor:
                cursor.execute("SELECT VERSION()")
                position = gtid_start(str(cursor.fetchone()[0]), self.start.gtid)
        return BinLogStreamReader(
            connection_settings=settings, server_id=self.server_id, blocking=True,
            resume_stream=True, only_events=_EVENTS, slave_heartbeat=1, enable_logging=False,
            freeze_schema=True, ignored_schemas=self._unwanted, **position)

    def _put(self, item: Any) -> None:
        while not self._stop.is_set():
            try:
                self.out.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def _run(self) -> None:
        error: BaseException | None = None
        try:
            self._stream = self._open()
            self._read(self._stream)
        except pymysql.MySQLError as exc:
            if not self._stop.is_set():
                error = self._position_lost(exc) or SourceError(
                    f"binlog of {self.source.name} failed at {self._position()}: "
                    f"{exc.args[-1] if exc.args else exc}")
        except SetlError as exc:  # handed to the pipeline, which reports it
            if not self._stop.is_set():
                error = exc
        except Exception as exc:  # a Python error names where it happened
            if not self._stop.is_set():
                error = SourceError(f"stage select, binlog of {self.source.name} at "
                                    f"{self._position()}: {type(exc).__name__}: {exc}")
        finally:
            self._close()
        self._put(StreamEnded(error))

    def _position_lost(self, exc: pymysql.MySQLError) -> PositionLostError | None:
        """The server's refusal to send the binlog from the position (error 1236: purged,
        or a position or GTID it never had) as a pause that says what to do; None for any
        other error."""
        if not exc.args or exc.args[0] != BINLOG_POSITION_REFUSED:
            return None
        oldest = ""
        try:
            with connect(self.source) as conn, conn.cursor() as cursor:
                cursor.execute("SHOW BINARY LOGS")
                first = cursor.fetchone()
                oldest = f"; the oldest binlog it keeps is {first[0]}" if first else ""
        except pymysql.MySQLError:
            pass  # the refusal alone still says enough
        return PositionLostError(
            f"source {self.source.name} cannot send its binlog from {self._position()}: "
            f"{exc.args[-1]}{oldest}. {LOST_POSITION_REMEDY}")

    def _close(self) -> None:
        stream = self._stream
        if stream is not None:
            try:
                stream.close()
            except Exception:  # closing a broken or already closed socket; we are leaving
                pass

    def _position(self, gtid: str = "") -> BinlogPosition:
        stream = self._stream
        if stream is None or not stream.log_file:
            return self.start
        return BinlogPosition(stream.log_file, int(stream.log_pos or 0), gtid)

    def _read(self, stream: BinLogStreamReader) -> None:
        changes: list[RowChange] = []
        gtid = self.start.gtid
        while not self._stop.is_set():
            event = stream.fetchone()
            if event is None:
                raise SourceError(f"the binlog stream of {self.source.name} ended at "
                                  f"{self._position()}")
            kind = type(event)
            if kind in _ROW_TYPES:  # the commonest first
                changes.extend(self._rows(event))
            elif kind is XidEvent:
                self._commit(changes, gtid, event.timestamp)
                changes = []
            elif kind is MariadbGtidEvent or kind is GtidEvent:
                gtid, changes = str(event.gtid), []
            elif kind is QueryEvent:
                query = event.query.strip()
                upper = query.upper()
                if upper == "BEGIN":
                    changes = []
                elif upper == "COMMIT":
                    self._commit(changes, gtid, event.timestamp)
                    changes = []
                else:
                    stream.table_map.clear()  # parsed once per table id: none survives DDL
                    self._ddl(event, query, gtid)
                    changes = []

    def _rows(self, event: Any) -> list[RowChange]:
        schema, table = event.schema, event.table
        if not self.wants(schema, table):
            return []
        kind = _ROW_TYPES[type(event)]
        keys = _keys(event.primary_key)
        ts = int(event.timestamp) * 1000
        if isinstance(event, fastrows.FastRows):  # plain columns: nothing to mend
            return [RowChange(schema, table, kind, keys, before, after, commit_ts_ms=ts)
                    for before, after in event.images()]
        if (schema, table) == BUFFER_TABLE:
            return _buffer_requests(kind, event.rows)
        bits = self._special(event)
        if kind is ChangeType.INSERT:
            return [RowChange(schema, table, kind, keys, None,
                              _image(row["values"], row["none_sources"], bits), commit_ts_ms=ts)
                    for row in event.rows]
        if kind is ChangeType.DELETE:
            return [RowChange(schema, table, kind, keys,
                              _image(row["values"], row["none_sources"], bits), None,
                              commit_ts_ms=ts) for row in event.rows]
        return [RowChange(schema, table, kind, keys,
                          _image(row["before_values"], row["before_none_sources"], bits),
                          _image(row["after_values"], row["after_none_sources"], bits),
                          commit_ts_ms=ts) for row in event.rows]

    def _special(self, event: Any) -> _Special:
        """The table's columns that need mending, worked out once per table map (the map of
        a table id is the same object until a DDL or a rotation replaces it)."""
        table = event.table_map[event.table_id]
        found = self._specials.get(event.table_id)
        if found is None or found[0] is not table:
            found = self._specials[event.table_id] = (table, _Special.of(event))
        return found[1]

    def _ddl(self, event: Any, query: str, gtid: str) -> None:
        if not self.ddl:
            self._commit([], gtid, event.timestamp)
            return
        schema = event.schema.decode() if isinstance(event.schema, bytes) else str(event.schema)
        try:
            statement, session = ddlsession.of_event(event, self._facts)
        except SourceError as exc:
            raise SourceError(f"binlog of {self.source.name} at {self._position(gtid)}: "
                              f"{exc}") from None
        change = RowChange(schema, "", ChangeType.DDL, ddl=statement,
                           commit_ts_ms=int(event.timestamp) * 1000,
                           session=self._database_defaults(statement, schema, session))
        self._commit([change], gtid, event.timestamp)

    def _database_defaults(self, statement: str, schema: str, session: Session) -> Session:
        """Follow CREATE/ALTER DATABASE; a CREATE TABLE carries its database's defaults as
        they are at this point of the binlog (its target database is made with them)."""
        mode = ddlsession.sql_mode(session)
        database = parse_database(statement, schema, mode)
        if database is not None:
            found = self._facts.defaults(*database_options(statement, mode))
            server = dict(session).get("collation_server")
            if found is None and database.kind == "CREATE" and server:
                found = self._facts.defaults(None, server)
            if found is not None:
                self._databases[database.schema] = found
            return session
        table = parse_ddl(statement, schema, mode)
        known = self._databases.get(table.names[0].schema) \
            if table is not None and table.kind == "CREATE" else None
        return (*session, (ddlsession.DATABASE_DEFAULTS, known)) if known else session

    def _commit(self, changes: list[RowChange], gtid: str, timestamp: int) -> None:
        echo = False
        if self.loop_channel is not None:
            marks = [c for c in changes if (c.schema, c.table) == MARK_TABLE]
            if any((c.after or c.before or {}).get("CHANNEL_ID") == self.loop_channel
                   for c in marks):
                changes, echo = [], True  # loaded by the opposite pipeline: position only
            elif marks:
                changes = [c for c in changes if (c.schema, c.table) != MARK_TABLE]
        self._put(Transaction(tuple(changes), self._position(gtid), int(timestamp) * 1000,
                              int(time.time() * 1000), echo))
