"""shared/positions.py: a resume at a stored file/pos on MariaDB reads the server's GTID state
there (BINLOG_GTID_POS) and refuses a binlog that holds another history now (reset with
RESET MASTER, or a server rebuilt under the same server_id@host:port) instead of streaming
from an arbitrary offset of it."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from shared.errors import PositionConflictError
from shared.model import BinlogPosition
from shared.positions import check_start, state_conflict


@pytest.mark.parametrize("stored, found", [
    ("0-41-9", "0-41-9"),
    ("0-41-9", "0-41-9,7-42-3"),  # a position set by GTID names fewer domains
    ("0-41-9,7-42-3", "7-42-3,0-41-9"),
])
def test_a_state_that_holds_every_stored_domain_fits(stored: str, found: str) -> None:
    assert state_conflict(stored, found) == ""


@pytest.mark.parametrize("stored, found, says", [
    ("0-41-9", "0-41-12", "the server's GTID state there is 0-41-12"),  # seq passed it
    ("0-41-9", "0-41-3", "the server's GTID state there is 0-41-3"),
    ("0-41-9", "0-43-9", "the server's GTID state there is 0-43-9"),  # another server
    ("0-41-9,7-42-3", "0-41-9", "the server's GTID state there is 0-41-9"),  # domain gone
    ("0-41-9", "", "the server's GTID state there is empty"),
    ("0-41-9", None, "no event begins there now"),  # BINLOG_GTID_POS is NULL
])
def test_a_state_that_differs_in_a_stored_domain_conflicts(
        stored: str, found: str | None, says: str) -> None:
    assert state_conflict(stored, found) == says


def test_inside_a_group_after_its_ddl_the_group_s_own_gtid_is_counted() -> None:
    """CREATE … SELECT: the position after its statement is stored with the state before
    the group, and the server's state there counts the group's GTID."""
    assert state_conflict("0-41-9", "0-41-10", inside=True) == ""
    assert state_conflict("0-41-9,1-41-4", "0-41-10,1-41-4", inside=True) == ""
    assert state_conflict("0-41-9", "0-41-11", inside=True) == ""  # sequences may skip
    assert state_conflict("0-41-9", "0-41-8", inside=True)  # behind: not this group
    assert state_conflict("0-41-9,1-41-4", "0-41-10,1-41-5", inside=True)  # two domains
    assert state_conflict("0-41-9", "0-41-10", inside=False)  # at a group's start


class Server:
    """A cursor answering as a MariaDB whose binlog holds ``files`` of ``size`` bytes
    (BINLOG_GTID_POS gives ``found``; SHOW BINLOG EVENTS ``event`` at the position, or, with
    ``events``, its rows from there; ``offset_refused``: the server's Wrong offset error)."""

    def __init__(self, found: str | None, files: tuple[str, ...] = ("binlog.000001",),
                 event: str = "Gtid", mysql: bool = False, size: int = 1_000_000,
                 events: list[tuple[Any, ...]] | None = None,
                 offset_refused: bool = False) -> None:
        self.found, self.files, self.event, self.mysql = found, files, event, mysql
        self.size, self.events, self.offset_refused = size, events, offset_refused
        self.rows: list[tuple[Any, ...]] = []
        self.asked: list[str] = []

    def execute(self, sql: str, args: Any = None) -> None:
        self.asked.append(sql.split()[0] + " " + sql.split()[1])
        if sql.startswith("SELECT BINLOG_GTID_POS"):
            if self.mysql:
                raise pymysql.err.OperationalError(1305, "FUNCTION BINLOG_GTID_POS does not "
                                                         "exist")
            self.rows = [(self.found,)]
        elif sql.startswith("SHOW BINARY LOGS"):
            self.rows = [(name, self.size) for name in self.files]
        elif self.offset_refused:
            raise pymysql.err.OperationalError(1220, "Error when executing command SHOW "
                                                     "BINLOG EVENTS: Wrong offset or I/O error")
        elif self.events is not None:
            self.rows = self.events[:args[2] if len(args) > 2 else None]
        else:
            self.rows = [("binlog.000001", args[1], self.event, 41, args[1] + 40, ""),
                         ("binlog.000001", args[1] + 40, "Query", 41, args[1] + 90, "")]
            self.rows = self.rows[:args[2] if len(args) > 2 else 1]

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


class BigNext(Server):
    """The event after the offset is over max_allowed_packet: two events are not read."""

    def execute(self, sql: str, args: Any = None) -> None:
        if sql.startswith("SHOW BINLOG") and args[2] == 2:
            raise pymysql.err.OperationalError(1220, "Wrong offset or I/O error")
        super().execute(sql, args)


AT = BinlogPosition("binlog.000001", 1881, "0-41-9", "41@h:3306")


def check(cursor: Server, at: BinlogPosition = AT) -> bool:
    return check_start(cursor, at, "pipeline c.p, source src", "c/p").inside


def test_a_binlog_reset_since_the_position_was_written_is_refused() -> None:
    with pytest.raises(PositionConflictError) as raised:
        check(Server("0-41-14"))
    message = str(raised.value)
    for part in ("pipeline c.p, source src", "binlog.000001:1881", "GTID state 0-41-9",
                 "the server's GTID state there is 0-41-14", "RESET MASTER",
                 "the server rebuilt", "Nothing was read",
                 "setl position set c/p --gtid STATE",
                 "setl position set c/p --latest --replay"):
        assert part in message, (part, message)


@pytest.mark.parametrize("cursor", [
    Server(None, offset_refused=True),  # the server reads no event header there
    Server(None, size=1500),  # the file ends before the offset
    Server(None, events=[("binlog.000001", 1881, "Write_rows_v1", 41, 7000, ""),
                         ("binlog.000001", 1950, "Query", 41, 2000, "")]),  # not its end
    Server(None, events=[("binlog.000001", 1881, "Query", 41, 2_000_000, "")]),  # past it
])
def test_no_event_at_the_position_of_a_file_the_server_has_is_refused(cursor: Server) -> None:
    with pytest.raises(PositionConflictError, match="no event begins there now"):
        check(cursor)


def test_an_event_the_server_cannot_scan_up_to_resumes_unchecked(
        caplog: pytest.LogCaptureFixture) -> None:
    """BINLOG_GTID_POS is NULL at every offset of a file after an event larger than the
    connection's max_allowed_packet (MariaDB's scan from the file's start fails there): the
    CI's shared source, past a 32 MiB update of a 16 MiB blob, refused every resume. An
    event begins at the offset: the state there is unknown, the resume goes on."""
    assert check(Server(None)) is False
    assert "event=resume_history_unchecked position=binlog.000001:1881" in caplog.text
    assert check(Server(None, event="Annotate_rows")) is True  # inside a CREATE … SELECT
    assert check(Server(None, size=1881)) is False  # the file's end: nothing there yet
    # the event after it over max_allowed_packet too: the offset's own event is read alone
    big_next = BigNext(None)
    assert check(big_next) is False


def test_a_file_the_server_lacks_is_left_to_the_stream_s_purged_refusal() -> None:
    assert check(Server(None, files=("binlog.000002",))) is False


def test_the_same_history_resumes() -> None:
    assert check(Server("0-41-9")) is False
    assert check(Server("0-41-9,3-50-1")) is False


def test_inside_a_create_select_after_its_statement_resumes_mid_group() -> None:
    assert check(Server("0-41-10", event="Annotate_rows")) is True
    with pytest.raises(PositionConflictError):
        check(Server("0-41-10", event="Gtid"))  # a group's start: the states must match


@pytest.mark.parametrize("at, found", [
    (BinlogPosition("binlog.000001", 1881), "0-41-10"),  # no stored state: a fresh server
    (AT, "0-41-9,5-60-1"),  # the group opens a domain the stored state lacks
])
def test_inside_a_create_select_whatever_the_stored_state_resumes_mid_group(
        at: BinlogPosition, found: str) -> None:
    """Inside is read from the event at the offset: the states told it only where they
    differed in a stored domain, and a start inside such a group was refused as a reset."""
    assert check(Server(found, event="Annotate_rows"), at) is True
    assert check(Server(found, event="Gtid"), BinlogPosition(at.file, at.pos)) is False


def test_no_event_at_a_position_without_a_stored_state_is_refused() -> None:
    with pytest.raises(PositionConflictError, match=r"binlog\.000001:1881, but no event begins"):
        check(Server(None, offset_refused=True), BinlogPosition("binlog.000001", 1881))


@pytest.mark.parametrize("at, cursor", [
    (BinlogPosition("", 0, "0-41-9"), Server("0-41-14")),  # a start by GTID
    (BinlogPosition("binlog.000002", 4, "0-41-9"), Server("")),  # a file's start
    (AT, Server("", mysql=True)),  # MySQL: no BINLOG_GTID_POS
])
def test_what_cannot_be_compared_keeps_today_s_start(at: BinlogPosition,
                                                    cursor: Server) -> None:
    assert check(cursor, at) is False


def test_the_state_read_at_the_start_is_handed_back_so_the_reader_asks_once() -> None:
    """BINLOG_GTID_POS reads the binlog file from its start up to the offset (up to
    max_binlog_size, 1 GiB): the reader seeds its GTID state from this answer."""
    server = Server("0-41-9,3-50-1")
    assert check_start(server, AT, "p", "c/p") == (False, "0-41-9,3-50-1")
    assert server.asked.count("SELECT BINLOG_GTID_POS(%s,") == 1
    assert check_start(Server(None), AT, "p", "c/p") == (False, "")  # NULL: unknown
    assert check_start(Server("0-41-9", mysql=True), AT, "p", "c/p") == (False, "")
    assert check_start(Server("0-41-9"), BinlogPosition(AT.file, AT.pos), "p", "c/p") \
        == (False, None)  # no stored state: nothing compared, not asked
