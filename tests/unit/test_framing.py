"""node/select/framing.py: events Select cannot read stop the pipeline, naming the event,
its position and what to do; none is stepped over."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from node.select import framing
from shared.errors import SourceError
from shared.model import BinlogPosition


def event(kind: int, body: bytes = b"", next_pos: int = 500) -> bytes:
    """A stream packet: the OK byte, the 19-byte event header, the body."""
    header = (0).to_bytes(4, "little") + bytes([kind]) + (1).to_bytes(4, "little") + \
        (19 + len(body)).to_bytes(4, "little") + next_pos.to_bytes(4, "little") + b"\0\0"
    return b"\0" + header + body


class Packets:
    def __init__(self, *packets: bytes, stop: threading.Event | None = None) -> None:
        self.packets, self.stop = list(packets), stop

    def next(self) -> bytes:
        if len(self.packets) == 1 and self.stop is not None:
            self.stop.set()  # the last one: the loop ends after it
        return self.packets.pop(0)


def reader() -> SimpleNamespace:
    return SimpleNamespace(_domains={}, start=BinlogPosition("binlog.000001", 4, gtid=""),
                           _tables={}, row_bytes={}, _stop=threading.Event(),
                           source=SimpleNamespace(name="src"), pipeline_id="c.p",
                           _position=lambda: BinlogPosition("binlog.000001", 400),
                           _mid_group=False, _in_txn=False)


@pytest.mark.parametrize("kind, says", [
    (26, "an INCIDENT event"),  # LOST_EVENTS: a native replica stops with 1590
    (38, "an XA PREPARE event"),
    (165, "a compressed query event"),
    (17, "a LOAD DATA logged as a statement"),  # its file's first block
    (18, "a LOAD DATA logged as a statement"),  # the statement that loads the blocks
    (9, "a LOAD DATA logged as a statement"),
    (6, "a LOAD DATA logged as a statement"),  # an old server's form
    (42, "a tagged GTID"),  # MySQL 8.3's
    (174, "an event of type 174"),  # a kind no server wrote when this was made
])
def test_an_event_select_cannot_read_stops_it_where_it_is(kind: int, says: str) -> None:
    with pytest.raises(SourceError) as raised:
        framing.frame(reader(), Packets(event(kind, b"\x01\x00\x0bLOST_EVENTS")))
    message = str(raised.value)
    assert message.startswith(f"source src wrote {says}")
    assert "at binlog.000001:400" in message and "copy the changed tables again" in message


@pytest.mark.parametrize("kind", sorted(framing.SKIPPED))
def test_events_that_hold_no_change_are_stepped_over(kind: int) -> None:
    """STOP, heartbeats, annotations, checkpoints, GTID lists, a statement's context…"""
    found = reader()
    framing.frame(found, Packets(event(kind, b"\0" * 16), event(27), stop=found._stop))
    assert found._stop.is_set()


ROWS_EVENT = event(30, (7).to_bytes(6, "little") + b"\0" * 10)  # a WRITE_ROWS of table id 7


@pytest.mark.parametrize("after, says", [
    (event(162, b"\0" * 13), "rows events without a commit before the next transaction; "
                             "setl does not know what wrote them"),  # a MariaDB GTID
    (event(33, b"\0" * 42), "rows events without a commit before the next transaction"),
    (event(15, b"\0" * 60), "the file before ended with rows events and no commit: the "
                            "source stopped while writing a transaction"),  # the next file
], ids=["mariadb gtid", "mysql gtid", "format description"])
def test_rows_without_a_commit_before_the_next_group_stop(after: bytes, says: str) -> None:
    """They were dropped: a group of a shape setl does not know lost its rows silently (and
    a non-transactional table's rows, a source that crashed while writing them kept)."""
    found = reader()
    found._tables[7] = SimpleNamespace(number=1, system=False)
    found.row_bytes[1] = (10, 10.0)
    with pytest.raises(SourceError, match=says) as raised:
        framing.frame(found, Packets(ROWS_EVENT, after))
    if after[5] == 15:
        assert "setl position set c/p --file binlog.000001 --pos 4" in str(raised.value)


@pytest.mark.parametrize("query", ["ALTER TABLE t ADD c INT", "BEGIN"])
def test_rows_outside_a_transaction_before_a_statement_stop(query: str) -> None:
    """A DDL (or a BEGIN) read while rows wait outside any transaction cleared them: lost on
    the target without a word."""
    from node.select.binlog import BinlogReader

    found = reader()
    found._tables[7] = SimpleNamespace(number=1, system=False)
    found.row_bytes[1] = (10, 10.0)
    vars(found).update(
        _in_txn=False, loop_channel=None, _pos=0, _ddl=lambda *args: None,
        _rollbacks=SimpleNamespace(forget=lambda: None),
        _echoes=SimpleNamespace(echo=lambda *args: False),
        _position=lambda state="": BinlogPosition("binlog.000001", 400),
        _library_event=lambda data: SimpleNamespace(query=query, schema=b"db"))
    found._query = lambda *args: BinlogReader._query(found, *args)
    with pytest.raises(SourceError, match="rows events without a commit"):
        framing.frame(found, Packets(ROWS_EVENT, event(2, b"\0" * 16), stop=found._stop))


def test_table_ids_are_forgotten_at_every_rotation_and_file_start() -> None:
    """A source that restarted numbers its tables from the start again, and the stream goes
    into its new file by a made-up rotation (timestamp 0): a table id known from the old file
    took the new file's rows for another table's, or for an unwanted one's."""
    from node.select.binlog import BinlogReader

    name = b"binlog.000002"
    rotate = event(4, (4).to_bytes(8, "little") + name)  # timestamp 0
    found = SimpleNamespace(_tables={7: "old"}, _pos=0, _file="")
    BinlogReader._rotate(found, rotate)
    assert found._tables == {} and found._file == "binlog.000002" and found._pos == 4
    found = SimpleNamespace(_tables={7: "old"}, _stream=None, _file_checksum=False,
                            _library_event=lambda data: None)
    BinlogReader._format(found, event(15, b"\0" * 60))
    assert found._tables == {}


TABLE_MAP = event(19, (7).to_bytes(6, "little") + b"\0" * 20)
XID = event(16, b"\0" * 8)


def committing() -> tuple[SimpleNamespace, list[int]]:
    found = reader()
    commits: list[int] = []
    found._pos = 0
    found._table_map = lambda data: found._tables.setdefault(
        7, SimpleNamespace(number=1, system=False))
    found.row_bytes[1] = (10, 5.0)
    found._commit = lambda events, *rest, **kw: commits.append(len(events))
    return found, commits


@pytest.mark.parametrize("first", [TABLE_MAP, ROWS_EVENT], ids=["table map", "rows"])
def test_rows_before_any_group_s_start_are_a_transaction_s_tail_and_stop(first: bytes) -> None:
    """A stream opened inside a transaction (a reset or rebuilt source's binlog at the
    stored offset): its tail was committed as a transaction of its own."""
    found, commits = committing()
    with pytest.raises(SourceError, match="the start is inside a transaction") as raised:
        framing.frame(found, Packets(first, ROWS_EVENT, XID, stop=found._stop))
    assert commits == []
    assert "setl position set c/p --gtid STATE" in str(raised.value)


def test_rows_after_a_group_s_start_or_after_a_checked_ddl_start_are_read() -> None:
    gtid = event(162, (5).to_bytes(8, "little") + b"\0" * 5)  # not standalone: a BEGIN
    found, commits = committing()
    framing.frame(found, Packets(gtid, TABLE_MAP, ROWS_EVENT, XID, stop=found._stop))
    assert commits == [1]
    found, commits = committing()
    found._mid_group = True  # after a CREATE … SELECT's statement, checked at the open
    framing.frame(found, Packets(TABLE_MAP, ROWS_EVENT, XID, stop=found._stop))
    assert commits == [1]


def test_a_begin_opens_a_group_on_a_server_without_gtid_events() -> None:
    found, commits = committing()

    def begin(data: bytes, *rest: Any) -> bool:
        found._in_txn = True
        return True

    found._query = begin
    framing.frame(found, Packets(event(2, b"\0" * 30), TABLE_MAP, ROWS_EVENT, XID,
                                 stop=found._stop))
    assert commits == [1]


def test_a_rotation_into_a_new_file_is_a_position_point_at_its_start() -> None:
    """An idle pipeline's position rows follow the source's files (a row left in a file the
    source purges could not be started from): a rotation into another file, at its start,
    hands Select that position with the state after the last transaction; the stream's own
    made-up rotations into the file it reads (at its start, or after a reconnect) do not."""
    from node.select.binlog import BinlogReader

    def rotate(name: bytes, pos: int = 4) -> bytes:
        return event(4, pos.to_bytes(8, "little") + name, next_pos=0)

    found, commits = committing()
    found._file, found._pos = "binlog.000001", 4
    points: list[tuple[str, int, str]] = []
    found._rotate = lambda data: BinlogReader._rotate(found, data)
    found._file_start = lambda state, data: points.append((found._file, found._pos, state))
    gtid = event(162, (5).to_bytes(8, "little") + b"\0" * 5)  # 0-1-5, with a BEGIN
    framing.frame(found, Packets(
        rotate(b"binlog.000001"), gtid, TABLE_MAP, ROWS_EVENT, XID,
        rotate(b"binlog.000002"), rotate(b"binlog.000002"),  # the end's, then the stream's
        rotate(b"binlog.000002", 900), rotate(b"binlog.000003"), stop=found._stop))
    assert commits == [1]
    assert points == [("binlog.000002", 4, "0-1-5"), ("binlog.000003", 4, "0-1-5")]
