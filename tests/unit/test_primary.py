"""node/primary.py, node/held.py and manager/switch.py without servers: what a member's probe
says decides whether a pipeline goes on there, waits, or stops with what to do."""

from __future__ import annotations

import pymysql
import pytest

from manager import switch
from node.cursor import Cursor, Resume
from node.held import _not_of_this_binlog, check_held, on_server
from node.primary import Primary, SwitchPending
from shared import members
from shared.errors import ConflictError, PositionLostError
from shared.members import PrimaryRecord, Probe
from shared.model import BinlogPosition, DataSource
from shared.secrets import SecretRef

OLD, NEW = "41@127.0.0.1:3306", "42@127.0.0.1:3307"
HOSTS = ("127.0.0.1:3306", "127.0.0.1:3307")


def source(port: int = 3306, switch_after_s: int = 0) -> DataSource:
    return DataSource("source", "127.0.0.1", port, "setl", SecretRef("env:NONE"),
                      hosts=HOSTS, switch_after_s=switch_after_s)


def probes(monkeypatch: pytest.MonkeyPatch, **by_port: Probe) -> None:
    monkeypatch.setattr(members, "probe", lambda s: by_port[f"p{s.port}"])


def at(gtid: str, server: str = OLD) -> BinlogPosition:
    return BinlogPosition("binlog.000009", 900, gtid, server)


# -- errant domains: transactions the old primary never had -----------------------------------
def test_a_domain_the_old_primary_never_had_stops_the_resume_by_gtid() -> None:
    """The promoted replica has local writes in domain 7 (SET gtid_domain_id = 7 on the
    replica): resumed at the old primary's state, MariaDB would send them all from its
    binlog's start. The start stops instead, naming the domain and both ways on."""
    resume = Resume(Cursor(at("0-41-100"), 5, run="r"))
    with pytest.raises(PositionLostError) as caught:
        on_server("ch.p", resume, NEW, "0-41-100,7-42-3")
    message = str(caught.value)
    assert "GTID domain 7" in message and "up to 7-42-3" in message, message
    assert "setl position set ch/p --gtid 0-41-100 --replay" in message, message
    assert "setl position set ch/p --gtid 0-41-100,7-42-3 --replay" in message, message
    # every domain seen: by GTID state, as before
    assert on_server("ch.p", resume, NEW, "0-42-120").start.position == \
        BinlogPosition(gtid="0-41-100")
    # the same server's own file/pos: nothing to find by state
    assert on_server("ch.p", resume, OLD, "0-41-100,7-41-3") is resume


# -- two histories: a replicating member that diverged never catches up ------------------------
def test_a_diverged_member_still_replicating_stops_instead_of_waiting_for_ever(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Domain 1 of the member went on with its own transactions past the target's 1-41-50:
    its replication may run (or retry) for ever, it never gets 1-41-50."""
    probes(monkeypatch, p3307=Probe("127.0.0.1:3307", server=NEW, replicating=True,
                                    gtid_state="0-41-100,1-41-40,1-42-60",
                                    gtid_pos="0-41-100,1-42-60"))
    rows = {"t": Cursor(at("0-41-100,1-41-50"), 9, run="r")}
    with pytest.raises(PositionLostError) as caught:
        check_held("ch.p", source(3307), Cursor(at("0-41-90,1-41-45"), 8, run="r"), rows)
    message = str(caught.value)
    assert "two histories" in message and "1-41-50 (it is at 1-42-60 in domain 1)" in \
        message, message
    # behind in that domain and replicating: it may catch up, so the start waits
    probes(monkeypatch, p3307=Probe("127.0.0.1:3307", server=NEW, replicating=True,
                                    gtid_state="0-41-100,1-41-40", gtid_pos="0-41-100,1-41-40"))
    with pytest.raises(SwitchPending, match="waiting for it to catch up"):
        check_held("ch.p", source(3307), Cursor(at("0-41-90,1-41-45"), 8, run="r"), rows)


# -- automatic switch: a writable member that still replicates is no primary -------------------
class Catalog:
    def __init__(self) -> None:
        self.stored: list[PrimaryRecord] = []

    def source(self, name: str) -> DataSource:
        return source()

    def primary(self, name: str) -> tuple[PrimaryRecord | None, int]:
        return None, 0

    def set_primary(self, name: str, record: PrimaryRecord, version: int) -> bool:
        self.stored.append(record)
        return True


def test_an_automatic_switch_waits_for_a_writable_member_that_still_replicates(
        monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = Catalog()
    replica = Probe("127.0.0.1:3307", server=NEW, gtid_state="0-41-100",
                    gtid_pos="0-41-100", replicating=True)  # read_only = OFF, not promoted
    probes(monkeypatch, p3306=Probe("127.0.0.1:3306", error="connection refused"),
           p3307=replica)
    runner = Primary(catalog, "source", "ch.p", clock=lambda: 100.0)  # type: ignore[arg-type]
    with pytest.raises(SwitchPending, match="still replicates from another server"):
        runner.resolve(at("0-41-100"))
    assert catalog.stored == []
    probes(monkeypatch, p3306=Probe("127.0.0.1:3306", error="connection refused"),
           p3307=Probe("127.0.0.1:3307", server=NEW, gtid_state="0-41-100",
                       gtid_pos="0-41-100"))  # promoted: STOP SLAVE; RESET SLAVE ALL
    assert members.address(runner.resolve(at("0-41-100"))) == "127.0.0.1:3307"
    assert [r.member for r in catalog.stored] == ["127.0.0.1:3307"]


# -- planned switch: a member behind the primary is refused -----------------------------------
def test_a_planned_switch_to_a_member_behind_the_primary_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = Catalog()
    old = Probe("127.0.0.1:3306", read_only=True, server=OLD, gtid_state="0-41-105",
                gtid_pos="0-41-105")
    behind = Probe("127.0.0.1:3307", server=NEW, gtid_state="0-41-103", gtid_pos="0-41-103")
    probes(monkeypatch, p3306=old, p3307=behind)
    with pytest.raises(ConflictError) as caught:
        switch.switch_source(catalog, "source", "127.0.0.1:3307")  # type: ignore[arg-type]
    message = str(caught.value)
    assert "lacks transactions of the primary 127.0.0.1:3306" in message, message
    assert "0-41-105 (it has server 41's transactions of domain 0 up to 0-41-103)" in \
        message, message
    assert catalog.stored == []
    caught_up = Probe("127.0.0.1:3307", server=NEW, gtid_state="0-41-105,0-42-106",
                      gtid_pos="0-42-106")
    probes(monkeypatch, p3306=old, p3307=caught_up)
    assert switch.switch_source(catalog, "source", "127.0.0.1:3307").member == \
        "127.0.0.1:3307"  # type: ignore[arg-type]
    # an old primary that does not answer cannot be compared: the nodes check the targets
    probes(monkeypatch, p3306=Probe("127.0.0.1:3306", error="gone"), p3307=behind)
    assert switch.switch_source(catalog, "source", "127.0.0.1:3307").member == \
        "127.0.0.1:3307"  # type: ignore[arg-type]


# -- members without gtid_strict_mode or log_slave_updates: never gone on at -------------------
@pytest.mark.parametrize("off", [("gtid_strict_mode",), ("log_slave_updates",),
                                 ("gtid_strict_mode", "log_slave_updates")])
def test_a_member_without_strict_mode_or_log_slave_updates_is_refused_at_every_step(
        monkeypatch: pytest.MonkeyPatch, off: tuple[str, ...]) -> None:
    """A member that took a local write while it replicated, with strict mode off (0-42-10
    before 0-41-10), holds every GTID the targets hold: nothing looks missing, yet a stream
    from their state never sends the write. Nor can a member without log_slave_updates
    (gtid_binlog_state empty) be checked. The start there, an automatic switch to it and a
    planned one all stop, saying what to set; nothing is stored."""
    unsafe = Probe("127.0.0.1:3307", server=NEW, gtid_state="" if "log_slave_updates" in off
                   else "0-41-10,0-42-10", gtid_pos="0-41-10", unsafe=off)
    probes(monkeypatch, p3306=Probe("127.0.0.1:3306", error="connection refused"),
           p3307=unsafe)
    rows = {"t": Cursor(at("0-41-10"), 9, run="r")}
    with pytest.raises(PositionLostError) as caught:
        check_held("ch.p", source(3307), Cursor(at("0-41-10"), 9, run="r"), rows)
    message = str(caught.value)
    assert "the pipeline would go on at 127.0.0.1:3307, which runs with " + \
        " and ".join(f"{name} = OFF" for name in off) in message, message
    assert all(members.GTID_SETTINGS[name] in message for name in off), message
    catalog = Catalog()
    runner = Primary(catalog, "source", "ch.p", clock=lambda: 100.0)  # type: ignore[arg-type]
    with pytest.raises(PositionLostError, match=r"setl would switch to 127\.0\.0\.1:3307"):
        runner.resolve(at("0-41-10"))
    with pytest.raises(PositionLostError, match=r"asked to switch to 127\.0\.0\.1:3307"):
        switch.switch_source(catalog, "source", "127.0.0.1:3307")  # type: ignore[arg-type]
    assert catalog.stored == []
    # one source host, no replica set: no switch by GTID, nothing refused here
    single = DataSource("source", "127.0.0.1", 3307, "setl", SecretRef("env:NONE"))
    assert check_held("ch.p", single, Cursor(at("0-41-10"), 9, run="r"), rows)[0] is unsafe


# -- a target row of the server read now: of its binlog now, or of one it reset ----------------
class BinlogCursor:
    """Answers what node.held asks of a binlog: its files, a Gtid event at every offset
    asked, and the GTID state there (``states``; missing: NULL)."""

    def __init__(self, files: dict[str, int], states: dict[int, str]) -> None:
        self.files, self.states, self.answer = files, states, list[tuple]()

    def execute(self, sql: str, args: tuple = ()) -> None:
        if sql == "SHOW BINARY LOGS":
            self.answer = list(self.files.items())
        elif sql.startswith("SHOW BINLOG EVENTS"):
            file, pos, _ = args
            self.answer = [(file, pos, "Gtid", 1, pos + 50, ""),
                           (file, pos + 50, "Query", 1, pos + 90, "")]
        else:
            assert sql.startswith("SELECT BINLOG_GTID_POS"), sql
            self.answer = [(self.states.get(args[1]),)]

    def fetchall(self) -> list[tuple]:
        return self.answer

    def fetchone(self) -> tuple:
        return self.answer[0]


def test_a_row_is_of_the_servers_binlog_now_unless_its_file_or_state_says_otherwise() -> None:
    cursor = BinlogCursor({"binlog.000003": 9000, "binlog.000004": 9000,
                           "binlog.000005": 700}, {900: "0-41-20,1-41-3", 300: "0-41-25"})
    ok = [BinlogPosition("binlog.000002", 500, "0-41-9", OLD),  # purged
          BinlogPosition("binlog.000004", 900, "0-41-20,1-41-3", OLD),
          BinlogPosition("binlog.000004", 900, "0-41-20", OLD),  # fewer domains stored
          BinlogPosition("binlog.000004", 900, "", OLD),  # written without a state
          BinlogPosition("binlog.000004", 600, "0-41-22", OLD),  # NULL: cannot say
          BinlogPosition("binlog.000005", 700, "", OLD),  # the end
          BinlogPosition("binlog.000009", 4, "", OLD)]  # a file's start: nothing held
    assert [_not_of_this_binlog(cursor, row) for row in ok] == [""] * len(ok)
    refused = {BinlogPosition("binlog.000006", 620, "0-41-9", OLD):
               "binlog.000006 is not among its binlog files now (binlog.000003 to "
               "binlog.000005)",
               BinlogPosition("mysql-bin.000001", 620, "0-41-9", OLD):
               "mysql-bin.000001 is not among its binlog files now",
               BinlogPosition("binlog.000004", 300, "0-41-9", OLD):
               "at binlog.000004:300 the server's GTID state there is 0-41-25",
               BinlogPosition("binlog.000005", 800, "0-41-9", OLD):
               "no event begins at binlog.000005:800"}
    for row, why in refused.items():
        assert why in _not_of_this_binlog(cursor, row), row


def test_a_row_at_a_files_start_is_judged_by_the_files_gtid_list() -> None:
    """An idle pipeline's row follows rotations to a file's start: a binlog reset since
    has a file of that name whose GTID list is another state (its events are not read:
    the offset is the file's first)."""
    cursor = BinlogCursor({"binlog.000003": 9000, "binlog.000004": 9000}, {4: "0-41-20"})
    assert _not_of_this_binlog(cursor, BinlogPosition("binlog.000004", 4, "0-41-20", OLD)) == ""
    assert "at binlog.000004:4 the server's GTID state there is 0-41-20" in \
        _not_of_this_binlog(cursor, BinlogPosition("binlog.000004", 4, "0-41-150", OLD))


class PurgingCursor(BinlogCursor):
    """The oldest file is purged between the listing and the read of its events (MariaDB
    answers 1220, as for an offset where no event begins)."""

    def execute(self, sql: str, args: tuple = ()) -> None:
        if sql.startswith("SHOW BINLOG EVENTS") and args[0] not in self.files:
            raise pymysql.err.OperationalError(1220, "Could not find target log")
        super().execute(sql, args)
        if sql == "SHOW BINARY LOGS":
            self.files.pop("binlog.000003", None)


def test_a_file_purged_while_it_is_checked_is_taken_for_purged() -> None:
    """A quiet target's row in the oldest file kept, purged between the listing and the read
    (an expiry at rotation, a backup tool's PURGE): refused as 'no event begins there', a
    misleading stop. A row past its file's end is still refused."""
    cursor = PurgingCursor({"binlog.000003": 9000, "binlog.000004": 9000}, {})
    row = BinlogPosition("binlog.000003", 900, "0-41-20", OLD)
    assert _not_of_this_binlog(cursor, row) == ""
    again = PurgingCursor({"binlog.000003": 9000, "binlog.000004": 9000}, {})
    sizes = {"binlog.000003": 9000, "binlog.000004": 9000}
    gone = BinlogPosition("binlog.000004", 9500, "0-41-20", OLD)  # past its end: no event
    assert "no event begins" in _not_of_this_binlog(again, gone, sizes)


def test_the_files_are_listed_once_and_a_shared_position_is_checked_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A lake's tables often hold one position: each row listed every binlog file again
    (MariaDB opens each) and read the binlog to its offset again, minutes at a start with
    hundreds of tables on a large binlog."""
    from node import held

    cursor = BinlogCursor({"binlog.000004": 9000}, {900: "0-41-20"})
    sent: list[str] = []
    monkeypatch.setattr(held, "connect", lambda _: _Conn(cursor, sent))
    rows = {f"t{n}": Cursor(BinlogPosition("binlog.000004", 900, "0-41-20", OLD), 1)
            for n in range(50)}
    held._check_rows_of_this_binlog("c.p", source(), OLD, rows)
    assert sent.count("SHOW BINARY LOGS") == 1
    assert sum(sql.startswith("SELECT BINLOG_GTID_POS") for sql in sent) == 1


class _Conn:
    def __init__(self, cursor: BinlogCursor, sent: list[str]) -> None:
        self._cursor, self.sent = cursor, sent

    def __enter__(self) -> _Conn:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def cursor(self) -> _Conn:
        return self

    def execute(self, sql: str, args: tuple = ()) -> None:
        self.sent.append(sql)
        self._cursor.execute(sql, args)

    def fetchall(self) -> list[tuple]:
        return self._cursor.fetchall()

    def fetchone(self) -> tuple:
        return self._cursor.fetchone()
