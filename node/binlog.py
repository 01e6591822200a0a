"""The one adapter around python-mysql-replication.

It reads the binlog from a position in its own thread and hands over whole committed
transactions (:class:`Transaction` of :class:`RowChange`) through a bounded queue; nothing
outside this module sees a library event class.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from node.changes import ChangeType, RowChange, Transaction
from node.source import connection_settings
from shared.errors import SourceError
from shared.model import BinlogPosition, DataSource

log = logging.getLogger("setl.node.binlog")
_EVENTS = [RotateEvent, MariadbGtidEvent, GtidEvent, QueryEvent, XidEvent, WriteRowsEvent,
           UpdateRowsEvent, DeleteRowsEvent]
_ROW_TYPES = {WriteRowsEvent: ChangeType.INSERT, UpdateRowsEvent: ChangeType.UPDATE,
              DeleteRowsEvent: ChangeType.DELETE}


class StreamEnded(Exception):  # a signal put on the queue, not raised to users
    """The reader stopped; carries the error that stopped it, if any."""

    def __init__(self, error: BaseException | None) -> None:
        super().__init__(str(error) if error else "stopped")
        self.error = error


def _keys(primary_key: Any) -> tuple[str, ...]:
    if not primary_key:
        return ()
    return (primary_key,) if isinstance(primary_key, str) else tuple(primary_key)


class BinlogReader:
    """Reads committed transactions after ``start`` into ``out`` until stopped."""

    def __init__(self, source: DataSource, server_id: int, start: BinlogPosition,
                 wants: Callable[[str, str], bool], out: queue.Queue[Any]) -> None:
        self.source, self.server_id, self.start = source, server_id, start
        self.wants, self.out = wants, out
        self._stop = threading.Event()
        self._stream: BinLogStreamReader | None = None
        self._thread = threading.Thread(target=self._run, name=f"binlog-{source.name}",
                                        daemon=True)

    def begin(self) -> None:
        self._thread.start()

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
            position = {"auto_position": self.start.gtid, "is_mariadb": True}
        return BinLogStreamReader(
            connection_settings=settings, server_id=self.server_id, blocking=True,
            resume_stream=True, only_events=_EVENTS, slave_heartbeat=1, enable_logging=False,
            **position)

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
                error = SourceError(f"binlog of {self.source.name} failed at "
                                    f"{self._position()}: {exc.args[-1] if exc.args else exc}")
        except Exception as exc:  # handed to the pipeline, which reports it
            if not self._stop.is_set():
                error = exc
        finally:
            self._close()
        self._put(StreamEnded(error))

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
            if isinstance(event, MariadbGtidEvent | GtidEvent):
                gtid, changes = str(event.gtid), []
            elif isinstance(event, XidEvent):
                self._commit(changes, gtid, event.timestamp)
                changes = []
            elif isinstance(event, QueryEvent):
                query = event.query.strip()
                upper = query.upper()
                if upper == "BEGIN":
                    changes = []
                elif upper == "COMMIT":
                    self._commit(changes, gtid, event.timestamp)
                    changes = []
                else:
                    self._ddl(event, query, gtid)
                    changes = []
            elif type(event) in _ROW_TYPES:
                changes.extend(self._rows(event))

    def _rows(self, event: Any) -> list[RowChange]:
        schema, table = event.schema, event.table
        if not self.wants(schema, table):
            return []
        kind = _ROW_TYPES[type(event)]
        keys = _keys(event.primary_key)
        ts = int(event.timestamp) * 1000
        if kind is ChangeType.INSERT:
            return [RowChange(schema, table, kind, keys, None, row["values"], commit_ts_ms=ts)
                    for row in event.rows]
        if kind is ChangeType.DELETE:
            return [RowChange(schema, table, kind, keys, row["values"], None, commit_ts_ms=ts)
                    for row in event.rows]
        return [RowChange(schema, table, kind, keys, row["before_values"], row["after_values"],
                          commit_ts_ms=ts) for row in event.rows]

    def _ddl(self, event: Any, query: str, gtid: str) -> None:
        schema = event.schema.decode() if isinstance(event.schema, bytes) else str(event.schema)
        change = RowChange(schema, "", ChangeType.DDL, ddl=query,
                           commit_ts_ms=int(event.timestamp) * 1000)
        self._commit([change], gtid, event.timestamp)

    def _commit(self, changes: list[RowChange], gtid: str, timestamp: int) -> None:
        self._put(Transaction(tuple(changes), self._position(gtid), int(timestamp) * 1000,
                              int(time.time() * 1000)))
