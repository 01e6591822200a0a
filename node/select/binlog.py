"""The one adapter around python-mysql-replication: Select's binlog framer.

The library opens the replication stream (connection, registration, checksums, heartbeats,
a file/position or GTID start) and parses the rare events whose structure matters here:
table maps (once per table id) and query events (DDL, with their session). Everything else
is read here straight from the socket (:class:`~node.select.packets.PacketReader`):
event headers, transaction boundaries (MariaDB GTID, XID), rotations; rows events are only
looked at for their table id and kept as the packet's bytes. Decoding rows is per-row work
and belongs to Extract, which runs it in Spark workers (:mod:`node.extract.decode`).

Whole committed transactions go out through a bounded queue (:meth:`BinlogReader.take`).
Two kinds of rows are decoded here because Select itself needs them: inserts into the free
door's ``retl.retl_buffer`` (requests, served in order) and, on two-way channels, the loop
marks of ``retl.retl_mark`` (a transaction the opposite pipeline loaded is dropped whole).
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysql.protocol import MysqlPacket
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.packet import BinLogPacketWrapper

from node import ddlsession
from node.changes import Event, RowChange, Transaction
from node.extract.decode import TableSchema
from node.select import checksums, libevents, statements
from node.select.databases import SourceDatabases
from node.select.framing import (
    _BODY,
    _V2,
    ROWS,
    frame,
)
from node.select.lastmaps import LastMaps, TargetTypes
from node.select.packets import PacketReader
from node.select.queries import QueryEvents
from node.select.rollbacks import Rollbacks, transactional
from node.select.source import LOST_POSITION_REMEDY, gtid_start
from node.select.systemrows import system_rows
from shared import gtid
from shared.endpoint import Connection, connect, connection_settings
from shared.errors import ConfigError, PositionLostError, SetlError, SourceError
from shared.model import BinlogPosition, DataSource
from shared.positions import Start, check_start, gtid_at, server_identity
from shared.retl import BUFFER_TABLE, INTENT_TABLE, MARK_TABLE, PENDING_TABLE, SIGNAL_TABLE
from shared.retl import SCHEMA as SYSTEM_SCHEMA  # the free door's buffer, the loop marks

BINLOG_POSITION_REFUSED = 1236  # ER_MASTER_FATAL_ERROR_READING_BINLOG
TAKE_AT_ONCE = 256  # transactions Select takes from the reader's queue under one lock
STREAM_READ_TIMEOUT_S = 30  # a silent stream (heartbeats come every second) is a dead one

log = logging.getLogger("setl.node.binlog")
libevents.install()  # the library's table-map and query-event readers, made exact



class StreamEnded(Exception):  # a signal put on the queue, not raised to users
    """The reader stopped; carries the error that stopped it, if any."""

    def __init__(self, error: BaseException | None) -> None:
        super().__init__(str(error) if error else "stopped")
        self.error = error


@dataclass(frozen=True, slots=True)
class MappedTable:
    """What Select knows of one table id: whether its rows go on, and how to read them."""

    schema: str
    table: str
    number: int  # 0: not wanted (its rows events are dropped unread)
    layout: TableSchema | None = None
    system: bool = False  # retl_buffer or retl_mark: decoded here


class BinlogReader(QueryEvents):
    """Frames committed transactions after ``start`` in its own thread; :meth:`take` hands
    them over in binlog order.

    Table maps are parsed once per table id (the server gives a table a new id whenever its
    definition changes; the ids are forgotten on every DDL and binlog rotation), and only
    for tables a pair wants: a pipeline crosses a busy neighbour's stretch of the binlog at
    the speed of reading event headers.
    """

    def __init__(self, source: DataSource, server_id: int, start: BinlogPosition,
                 wants: Callable[[str, str], bool], wants_schema: Callable[[str], bool],
                 loop_channel: str | None = None, ddl: bool = True,
                 queue_size: int = 10_000, pipeline_id: str = "",
                 layout_problem: Callable[[str, str, tuple[str, ...], tuple[str, ...]], str | None]
                 | None = None, altered: Callable[[str, str], None] | None = None,
                 target_types: TargetTypes | None = None) -> None:
        self.source, self.server_id, self.start = source, server_id, start
        # why a table's new columns do not fit its pairs (a column a pair includes is gone)
        self._layout_problem = layout_problem
        self._altered = altered  # a DDL names a table: its next table map tells its columns
        self.out: queue.Queue[Transaction | StreamEnded] = queue.Queue(maxsize=queue_size)
        # taken from ``out`` in one go and not handed to Select yet (its thread's alone):
        # one lock and wake-up of the reader for up to TAKE_AT_ONCE transactions, not each
        self._taken: collections.deque[Transaction | StreamEnded] = collections.deque()
        self.ddl = ddl  # DDL statements as changes (ddl_sync); else they only move the position
        self._wants, self._wants_schema = wants, wants_schema
        # a two-way channel: transactions carrying its own loop mark were loaded by the
        # opposite pipeline and are dropped (else every change would ping-pong for ever)
        self.loop_channel = loop_channel
        self.pipeline_id = pipeline_id  # whose watermarks (retl_signal rows) to pass on
        self.layouts: dict[int, TableSchema] = {}  # by table-map number: for Extract
        # by table-map number, a rows event's head and bytes per row change: a guess from
        # the columns, then what Extract found (:meth:`learn`); batches are cut by the rows
        # they give (framing.estimate)
        self.row_bytes: dict[int, tuple[int, float]] = {}
        self._stop = threading.Event()
        self._facts = ddlsession.SourceFacts(lambda: connect(source), f"source {source.name}")
        self._databases = SourceDatabases(self._facts)
        self._tables: dict[int, MappedTable] = {}  # by table id
        # the types a MODIFY changes from (else its target's column's: ``target_types``)
        self._last_maps = LastMaps(target_types)
        self._numbers = 0
        self._stream: BinLogStreamReader | None = None
        self._checksum = False  # the stream's: whether its rows events end with a CRC32
        self._file_checksum = False  # the binlog file's now read (its format description)
        self._file, self._pos = start.file, start.pos
        # which server's binlog this is, and the GTID state (MariaDB: the last GTID of each
        # domain) after each transaction: positions any member of a replica set resumes from
        self.server = ""
        self._domains: dict[int, str] = {}
        self._in_txn = False  # between a transaction's start and its commit
        self._mid_group = False  # the start is inside a group, after its DDL
        # the timestamp of the first event of the transaction being read, 0 between them:
        # until its commit nothing is selected, however many rows it holds (status's delay)
        self.reading_since_ms = 0
        self._echoes = statements.DropEchoes(loop_channel or "", pipeline_id)
        # its savepoints, and what rollbacks undo
        self._rollbacks = Rollbacks(transactional(lambda: connect(source)))
        self._thread = threading.Thread(target=self._run, name=f"binlog-{source.name}",
                                        daemon=True)

    def begin(self) -> None:
        if self.ddl:
            self._databases.read()
        self._thread.start()

    @property
    def backlog(self) -> int:
        """Transactions read and not taken yet (counted without the queue's lock: Select
        asks after every transaction, and a count a moment old only moves a cut)."""
        return len(self._taken) + len(self.out.queue)

    @property
    def queued_since_ms(self) -> int:
        """The commit time of the first transaction read and not taken yet (0: none)."""
        try:  # (read without the queue's lock: maybe gone)
            first = self._taken[0] if self._taken else self.out.queue[0]
        except IndexError:
            return 0
        return getattr(first, "commit_ts_ms", 0)

    def learn(self, sizes: dict[int, tuple[int, int]]) -> None:
        """Extract's count of (row changes, their bytes) by table-map number."""
        for number, (rows, size) in sizes.items():
            guess = self.row_bytes.get(number)
            if rows and guess is not None:
                self.row_bytes[number] = (guess[0], max(size / rows, 1.0))

    @property
    def checksum(self) -> bool:
        """Whether the source's events end with a CRC32 (known once the stream is open)."""
        return self._checksum

    def take(self, timeout_s: float) -> Transaction | None:
        """The next transaction, or None when none came within ``timeout_s``; raises the
        error that stopped the reader (and again on every later call)."""
        taken = self._taken
        if not taken:
            try:
                taken.append(self.out.get(timeout=max(timeout_s, 0.001)))
            except queue.Empty:
                return None
            out = self.out
            with out.mutex:  # what else queued meanwhile, under one lock
                more = min(len(out.queue), TAKE_AT_ONCE)
                for _ in range(more):
                    taken.append(out.queue.popleft())
                if more:
                    out.not_full.notify()  # (one reader thread puts)
        item = taken[0]
        if isinstance(item, StreamEnded):  # stays the last word for any later call
            raise item.error or SourceError(f"the binlog reader of {self.source.name} stopped")
        return taken.popleft()

    def stop(self) -> None:
        self._stop.set()
        self._close()
        self._thread.join(timeout=5)

    # -- the stream ---------------------------------------------------------------------------
    def _open(self) -> BinLogStreamReader:
        settings = connection_settings(self.source)
        settings.pop("connect_timeout")
        settings["read_timeout"] = STREAM_READ_TIMEOUT_S
        # the server sends a file written with checksums only to a replica that says it
        # reads them, whatever binlog_checksum is now (the library says so only when it is
        # not NONE): files of either setting are read, each by its own (:meth:`_format`)
        settings["init_command"] = "SET @master_binlog_checksum = @@global.binlog_checksum"
        # is_mariadb only with a GTID: with it the library ignores file/pos and starts at the
        # oldest binlog. A file/pos dump works on MariaDB as on MySQL.
        position: dict[str, Any] = {"log_file": self.start.file, "log_pos": self.start.pos}
        if not self.start.file and self.start.gtid:
            with connect(self.source) as conn, conn.cursor() as cursor:
                cursor.execute("SELECT VERSION()")
                position = gtid_start(str(cursor.fetchone()[0]), self.start.gtid)
        stream = BinLogStreamReader(
            connection_settings=settings, server_id=self.server_id, blocking=True,
            resume_stream=True, slave_heartbeat=1, enable_logging=False, freeze_schema=True,
            pymysql_wrapper=Connection,  # setl's: what it sends to log in, its TLS
            **position)
        stream._BinLogStreamReader__connect_to_stream()  # registration and the dump command
        stream._BinLogStreamReader__connect_to_ctl()  # the table maps' parser asks it once
        self._checksum = self._file_checksum = bool(stream._BinLogStreamReader__use_checksum)
        with connect(self.source) as conn, conn.cursor() as cursor:
            self.server = server_identity(cursor)
            mariadb = "mariadb" in str(conn.get_server_info()).lower()
            # (the binlog there must be the history the position was written from)
            # (MySQL has no GTID state at a position to tell a reset binlog by, and logs a
            # CREATE … SELECT as one transaction a resume may start inside: rows before a
            # group's start are taken there, as they always were)
            checked = check_start(
                cursor, self.start, f"pipeline {self.pipeline_id}, source {self.source.name}",
                self.pipeline_id.replace(".", "/") or "CHANNEL/PIPELINE") if mariadb else \
                Start(True, None)
            self._mid_group = checked.inside
            state = self.start.gtid if not self.start.file else checked.state \
                if checked.state is not None else gtid_at(cursor, self.start)
            # (BINLOG_GTID_POS NULL, "": the state stored with the start is the state there;
            # without it positions would name only the domains read since, and a switch by
            # GTID would miss the quiet ones' transactions)
            state = state or self.start.gtid
            if state and mariadb:
                self._domains = {domain: f"{domain}-{server}-{sequence}" for domain, (
                    server, sequence) in gtid.parse(state).items()}
        return stream

    def _library_event(self, data: bytes) -> Any:
        """The library's event for a packet (a table map or a query event), parsed whole."""
        stream = self._stream
        assert stream is not None
        private = [getattr(stream, "_BinLogStreamReader__" + name) for name in (
            "allowed_events_in_packet", "only_tables", "ignored_tables", "only_schemas",
            "ignored_schemas", "freeze_schema", "ignore_decode_errors", "verify_checksum",
            "optional_meta_data", "enable_logging", "use_column_name_cache",
            "post_header_lengths")]
        wrapper = BinLogPacketWrapper(MysqlPacket(data, "utf8"), {}, stream._ctl_connection,
                                      stream.mysql_version, self._file_checksum, *private)
        return wrapper.event

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
            self._read(PacketReader(self._stream._stream_connection))
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

    def _position(self, state: str = "") -> BinlogPosition:
        if not self._file:
            return self.start
        return BinlogPosition(self._file, self._pos, state, self.server)

    # -- framing ------------------------------------------------------------------------------
    def _read(self, packets: PacketReader) -> None:
        frame(self, packets)

    def _rotate(self, data: bytes) -> bool:
        """A new binlog file: its name and start; table ids are forgotten (a server that
        restarted numbers its tables again, and the rotation into its new file is a made-up
        one, timestamp 0, as at the stream's start). Whether it ends with a CRC32 is
        read from the event itself: the one the server makes at the stream's start comes
        before any format description, in the setting of the file it starts in."""
        size = int.from_bytes(data[10:14], "little") - 19 - (4 if checksums.has_crc(data) else 0)
        pos, file = int.from_bytes(data[_BODY:_BODY + 8], "little"), \
            data[_BODY + 8:_BODY + size].decode()
        moved = bool(self._file) and file != self._file and pos == 4  # on into a new file
        self._pos, self._file = pos, file
        self._tables.clear()  # no transaction spans two files
        return moved

    def _file_start(self, state: str, data: bytes) -> None:
        """The stream went on into a new file (not at its start): the position there, with
        the state after the last transaction, as a point Select cuts a position-only batch
        at, so that an idle pipeline's position rows follow the source's files (a row left in
        a file the source purges could not be started from)."""
        now_ms = int(time.time() * 1000)
        self._put(Transaction((), self._position(state),
                              int.from_bytes(data[1:5], "little") * 1000 or now_ms, now_ms,
                              drop_due=self._echoes.due))

    def _format(self, data: bytes) -> None:
        """The server's format description: its version, and post-header lengths, which
        must be the standard ones for rows events (Extract reads them at fixed places); and
        whether the file's events end with a CRC32 (binlog_checksum when it was written: a
        file of another setting than the stream's is read by its own, and its rows events
        are made as the stream's: :mod:`node.select.checksums`)."""
        self._file_checksum = checksums.described(data)
        self._tables.clear()  # a file's first event: its table ids are its server's run's
        stream = self._stream
        event = self._library_event(data)
        if stream is None or event is None:
            return
        stream.mysql_version = event.mysql_version
        lengths = event.post_header_len
        stream._BinLogStreamReader__post_header_lengths = lengths
        for kind in ROWS:
            declared = lengths[kind - 1] if lengths and kind - 1 < len(lengths) else None
            if declared is not None and declared != (10 if kind in _V2 else 8):
                raise SourceError(f"source {self.source.name} declares {declared}-byte rows "
                                  f"event headers (type {kind}); setl reads the standard "
                                  "MariaDB/MySQL format only")

    def _table_map(self, data: bytes) -> None:
        table_id = int.from_bytes(data[_BODY:_BODY + 6], "little")
        if table_id in self._tables:
            return  # a table id is one definition for as long as it is known
        at = _BODY + 8
        schema = data[at + 1:at + 1 + data[at]].decode()
        at += 2 + data[at]
        table = data[at + 1:at + 1 + data[at]].decode()
        system = schema == SYSTEM_SCHEMA and (
            (schema, table) in (BUFFER_TABLE, SIGNAL_TABLE) or
            ((schema, table) in (MARK_TABLE, INTENT_TABLE) and self.loop_channel is not None))
        if not system and ((schema, table) == PENDING_TABLE or not (
                self._wants_schema(schema) and self._wants(schema, table))):
            self._tables[table_id] = MappedTable(schema, table, 0)
            return
        layout = TableSchema.of(self._library_event(data).get_table())
        number = 0
        if not system:
            problem = self._layout_problem and self._layout_problem(
                schema, table, tuple(column.name for column in layout.columns),
                layout.primary_key)
            if problem:
                raise ConfigError(problem)
            self._numbers += 1
            number = self._numbers
            self.layouts[number] = layout
            self.row_bytes[number] = (layout.event_head(), float(layout.row_bytes()))
            self._last_maps.seen(schema, table, layout)
        self._tables[table_id] = MappedTable(schema, table, number, layout, system)

    def _system_rows(self, mapped: MappedTable, data: bytes) -> list[RowChange]:
        assert mapped.layout is not None
        return system_rows((mapped.schema, mapped.table), mapped.layout, data,
                           self._file_checksum, self.pipeline_id, self._echoes)

    def _commit(self, events: list[Event], event_rows: int, decoded: list[RowChange],
                state: str, data: bytes, echo: bool = False) -> None:
        if self.loop_channel is not None and decoded:
            marks = [c for c in decoded if (c.schema, c.table) == MARK_TABLE]
            if any((c.after or c.before or {}).get("CHANNEL_ID") == self.loop_channel
                   for c in marks):
                events, decoded, event_rows, echo = [], [], 0, True  # the other side's: skip
            elif marks:
                decoded = [c for c in decoded if (c.schema, c.table) != MARK_TABLE]
        signals: tuple[tuple[str, int], ...] = ()
        if decoded and any(c.table == SIGNAL_TABLE[1] for c in decoded):
            signals = tuple((str(c.after["KIND"]), int(c.after["WINDOW_ID"]))
                            for c in decoded if (c.schema, c.table) == SIGNAL_TABLE and c.after)
            decoded = [c for c in decoded if (c.schema, c.table) != SIGNAL_TABLE]
        timestamp = int.from_bytes(data[1:5], "little")
        self.reading_since_ms = 0  # read whole: the selector's backlog from here
        self._put(Transaction(tuple(decoded), self._position(state), timestamp * 1000,
                              int(time.time() * 1000), echo, tuple(events), event_rows,
                              signals, self._echoes.due))

