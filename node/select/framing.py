"""Select's framing loop: the stream's events, one packet at a time, into transactions of
rows events kept as bytes (:class:`node.select.binlog.BinlogReader` runs it and does the
rare events' work). A module of its own so that the compiled build types its locals
(``framing.pxd``): the event's kind and a batch's row count are C values there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.changes import ChangeType, Event, RowChange
from node.select.checksums import as_stream
from shared.errors import PositionConflictError, SourceError

if TYPE_CHECKING:
    from node.select.binlog import BinlogReader
    from node.select.packets import PacketReader

# event types (the packet's byte 5)
QUERY, ROTATE, FORMAT_DESCRIPTION, XID, TABLE_MAP = 2, 4, 15, 16, 19
MYSQL_GTID, MARIADB_GTID = 33, 162
# rows events, with MariaDB's compressed ones (log_bin_compress=ON), which Extract inflates
ROWS = {23: ChangeType.INSERT, 24: ChangeType.UPDATE, 25: ChangeType.DELETE,
        30: ChangeType.INSERT, 31: ChangeType.UPDATE, 32: ChangeType.DELETE,
        166: ChangeType.INSERT, 167: ChangeType.UPDATE, 168: ChangeType.DELETE,
        169: ChangeType.INSERT, 170: ChangeType.UPDATE, 171: ChangeType.DELETE}
assert set(ROWS) == {*range(23, 26), *range(30, 33), *range(166, 172)}  # frame()'s ranges
# events nothing here reads, and skipping them would lose changes: what wrote them, and
# the setting that stops it
UNREADABLE = {165: ("a compressed query event (log_bin_compress=ON, a statement longer than "
                    "log_bin_compress_min_len)", "SET GLOBAL log_bin_compress=OFF"),
              39: ("a partial JSON update (binlog_row_value_options=PARTIAL_JSON)",
                   "SET GLOBAL binlog_row_value_options=''"),
              40: ("a compressed transaction (binlog_transaction_compression=ON)",
                   "SET GLOBAL binlog_transaction_compression=OFF"),
              38: ("an XA PREPARE event (an XA transaction)",
                   "commit such changes as ordinary transactions"),
              26: ("an INCIDENT event: changes it could not write to its binlog are missing "
                   "there (a replica stops here too, error 1590)",
                   "read its error log for what was lost")}
UNREADABLE[42] = ("a tagged GTID (gtid_next = UUID:TAG:N, MySQL 8.3 and later)",
                  "write without GTID tags")
# statement-format LOAD DATA (the file's blocks, then the statement that loads them): its
# rows are in no rows event
for _kind in (6, 7, 8, 9, 10, 11, 12, 17, 18):
    UNREADABLE[_kind] = ("a LOAD DATA logged as a statement (a session writing with "
                         "binlog_format=STATEMENT or MIXED)",
                         "SET GLOBAL binlog_format=ROW, and end the sessions that set another")
# events that carry nothing a target needs: the stream's own (STOP, heartbeats, GTID lists
# and checkpoints, encryption), a statement's context (INTVAR, RAND, USER_VAR: its text,
# which stops inside a transaction, decides), ignorable ones, MySQL's annotations. Any other
# kind stops the pipeline: one not read may hold changes (a new server's event type)
SKIPPED = frozenset((3, 5, 13, 14, 27, 28, 29, 34, 35, 36, 37, 41, 160, 161, 163, 164))
FL_STANDALONE = 1  # a MariaDB GTID event's flag: a statement of its own (DDL), no BEGIN
_V2 = {30, 31, 32, 169, 170, 171}  # rows events whose post-header has extra data
_BODY = 20  # the OK byte and the 19-byte event header



def estimate(size: int, guess: tuple[int, float]) -> int:
    """The row changes of a rows event of ``size`` bytes, by its table's (event head, bytes
    per row change): at least one."""
    head, per_row = guess
    return max(1, int((size - head) / per_row))


def frame(reader: BinlogReader, packets: PacketReader) -> None:
    """The reader's loop over the stream's events until it stops: rows events of wanted
    tables kept as bytes with their table-map number, transactions cut at their commits."""
    events: list[Event] = []
    decoded: list[RowChange] = []  # free-door requests, loop marks
    event_rows = 0
    domains = reader._domains
    state = reader.start.gtid if not domains else _state(domains)
    before = state  # the state before this group: a DDL inside a group is not all of it
    tables, row_bytes = reader._tables, reader.row_bytes
    stop = reader._stop
    foreign = False  # a file of another binlog_checksum than the stream's
    # a group's start (its GTID event, or BEGIN) was read: rows before it are a
    # transaction's tail (a start inside one), unless the start is after its own DDL
    opened = reader._mid_group
    while not stop.is_set():
        data = packets.next()
        kind = data[5]
        next_pos = int.from_bytes(data[14:18], "little")
        if 23 <= kind <= 25 or 30 <= kind <= 32 or 166 <= kind <= 171:  # ROWS, commonest
            mapped = tables.get(int.from_bytes(data[_BODY:_BODY + 6], "little"))
            if mapped is None:
                if not opened:
                    _inside(reader)
                raise SourceError(f"binlog of {reader.source.name} at {reader._position()}: "
                                  "a rows event of a table id no table map named")
            number = mapped.number
            if number:
                if foreign:
                    data = as_stream(data, reader._checksum)
                events.append((number, data))
                event_rows += estimate(len(data), row_bytes[number])
            elif mapped.system:
                decoded += reader._system_rows(mapped, data)
        elif kind == XID:
            reader._pos = next_pos or reader._pos
            reader._commit(events, event_rows, decoded, state, data)
            events, decoded, event_rows, reader._in_txn = [], [], 0, False
        elif kind == MARIADB_GTID:
            if events or decoded:
                uncommitted(reader)
            sequence, domain = int.from_bytes(data[_BODY:_BODY + 8], "little"), \
                int.from_bytes(data[_BODY + 8:_BODY + 12], "little")
            server = int.from_bytes(data[6:10], "little")
            domains[domain] = f"{domain}-{server}-{sequence}"
            before, state = state, _state(domains)
            events, decoded, event_rows = [], [], 0
            # status's delay while it is read, before its commit (a huge one: minutes)
            reader.reading_since_ms = int.from_bytes(data[1:5], "little") * 1000
            reader._in_txn = not data[_BODY + 12] & FL_STANDALONE  # a BEGIN of its own
            opened = True
        elif kind == TABLE_MAP:
            if not opened:
                _inside(reader)
            # a table id already known is one definition (the commonest: every transaction
            # maps its tables again): no call
            if int.from_bytes(data[_BODY:_BODY + 6], "little") not in tables:
                reader._table_map(data)
        elif kind == QUERY:
            reader._pos = next_pos or reader._pos
            if reader._query(data, events, event_rows, decoded, state, before):
                events, decoded, event_rows = [], [], 0
            opened = opened or reader._in_txn  # a BEGIN
            continue
        elif kind == ROTATE:
            if reader._rotate(data) and not (events or decoded or reader._in_txn):
                reader._file_start(state, data)  # an idle pipeline's rows follow the files
            continue
        elif kind == FORMAT_DESCRIPTION:
            if events or decoded:
                uncommitted(reader, crashed=True)
            reader._format(data)
            foreign = reader._file_checksum != reader._checksum
        elif kind == MYSQL_GTID:
            if events or decoded:
                uncommitted(reader)
            before, state, events, decoded, event_rows = state, \
                str(reader._library_event(data).gtid), [], [], 0  # MySQL: the transaction's
            # GTID (its sets are not followed)
            reader._in_txn = False  # a BEGIN query follows for a transaction
            opened = True
        elif kind not in SKIPPED:
            what, remedy = UNREADABLE.get(kind, (
                f"an event of type {kind}", "find what writes it (a newer server's feature?) "
                "and turn it off"))
            raise SourceError(
                f"source {reader.source.name} wrote {what} at {reader._position()}, which "
                f"setl cannot read; on the source: {remedy}; then copy the changed tables "
                "again")
        if next_pos:
            reader._pos = next_pos


def uncommitted(reader: BinlogReader, crashed: bool = False) -> None:
    """Rows read, and a new group or file begins before their commit: a group of a shape
    setl does not know, or (``crashed``: a new file) a source that stopped while writing it.
    Dropped, they would be lost on the target without a word where they were kept."""
    where = f"binlog of {reader.source.name} at {reader._position()}"
    if crashed:
        raise SourceError(
            f"{where}: the file before ended with rows events and no commit: the source "
            "stopped while writing a transaction. Its crash recovery undid it in "
            "transactional tables (InnoDB) but not in others (MyISAM, Aria), so setl stops "
            "rather than guess. Move the pipeline to this file's start: setl position set "
            f"{reader.pipeline_id.replace('.', '/') or 'CHANNEL/PIPELINE'} --file "
            f"{reader._position().file} --pos 4, resume, then setl verify --repair the "
            "tables it wrote")
    raise SourceError(
        f"{where}: rows events without a commit before the next transaction; setl does not "
        "know what wrote them and stops rather than drop them. Report the source's version "
        "and the events here (mariadb-binlog --start-position), then copy the changed "
        "tables again")


def _inside(reader: BinlogReader) -> None:
    """A table map or rows before any group's start since the stream opened: the start is
    inside a transaction (the binlog there is not what the position was written from: a
    reset or rebuilt source), and its tail alone would be taken for a transaction."""
    raise PositionConflictError(  # (the same start fails the same: a pause, no retries)
        f"binlog of {reader.source.name} at {reader._position()}: rows events came before "
        f"any transaction's start since the stream opened at {reader.start}: the start is "
        "inside a transaction, so only its tail would be loaded. Nothing of it was loaded. "
        "Was the source's binlog reset (RESET MASTER) or the server rebuilt since the "
        "position was written? Set where the pipeline starts (setl position set "
        f"{reader.pipeline_id.replace('.', '/') or 'CHANNEL/PIPELINE'} --gtid STATE, the "
        "state its targets hold, if the server still has it), or set --latest --replay, "
        "start, and copy the tables again while it runs (setl snapshot)")


def _state(domains: dict[int, str]) -> str:
    """The GTID state: the last GTID of each domain, in domain order."""
    if len(domains) == 1:
        return next(iter(domains.values()))
    return ",".join(domains[d] for d in sorted(domains))
