"""GTID states and positions compared across the servers of a replica set."""

from __future__ import annotations

import pytest

from node.cursor import Cursor, Resume, resume
from shared import gtid
from shared.errors import PositionConflictError
from shared.model import BinlogPosition

OLD, NEW = "41@db:3306", "42@db:3307"


def test_states_compare_domain_by_domain() -> None:
    assert gtid.compare_states("0-41-5", "0-41-7") == -1
    assert gtid.compare_states("0-42-9,1-41-3", "0-41-7,1-41-3") == 1
    assert gtid.compare_states("0-41-5", "0-41-5") == 0
    assert gtid.compare_states("", "0-41-1") == -1
    with pytest.raises(PositionConflictError, match="two histories"):
        gtid.compare_states("0-41-5,1-41-9", "0-41-7,1-41-3")
    with pytest.raises(PositionConflictError, match="same number"):
        gtid.compare_states("0-41-5", "0-42-5")  # a failover that lost 0-41-5


def test_file_positions_of_one_server_and_states_of_two() -> None:
    a = BinlogPosition("binlog.000002", 900, "0-41-10", OLD)
    b = BinlogPosition("binlog.000001", 4000, "0-41-12", NEW)  # a replica's own files
    assert gtid.compare(a, b) == -1  # by GTID: the file/pos are of other binlogs
    assert gtid.compare(a, BinlogPosition("binlog.000002", 100, "0-41-1", OLD)) == 1
    # rows written before positions named their server: the source's own binlog
    assert gtid.compare(a, BinlogPosition("binlog.000003", 4)) == -1
    with pytest.raises(PositionConflictError, match="cannot be compared"):
        gtid.compare(a, BinlogPosition("binlog.000001", 4, "", NEW))


def test_positions_of_a_binlog_started_again_under_the_same_name_compare_by_state() -> None:
    """The old primary rejoined after RESET MASTER (or restored from a backup) keeps its
    name: a quiet target's row of its old binlog is behind the batches of its new one,
    whatever their files say (by file/pos the row was past them all: every batch skipped)."""
    old_row = BinlogPosition("binlog.000004", 620, "0-41-9", OLD)
    for end in (BinlogPosition("binlog.000001", 596, "0-42-11", OLD),
                BinlogPosition("binlog.000001", 1086, "0-41-13", OLD),
                BinlogPosition("binlog.000001", 300, "0-41-9,1-42-3", OLD)):  # a new domain
        assert gtid.compare(old_row, end) == -1
        assert gtid.compare(end, old_row) == 1
    # one state, files of two binlogs: the same transaction; file/pos as always
    assert gtid.compare(old_row, BinlogPosition("binlog.000004", 620, "0-41-9", OLD)) == 0
    assert gtid.compare(old_row, BinlogPosition("binlog.000005", 4, "0-41-9", OLD)) == -1


def test_states_of_two_histories_of_one_server_stop_rather_than_skip() -> None:
    """Domains that went on both ways, or one number that is two transactions: neither is
    taken for holding the other (a target would skip what it never got)."""
    a = BinlogPosition("binlog.000004", 620, "0-41-9,1-41-5", OLD)
    for other in ("0-41-10,1-41-4", "0-42-9,1-41-5"):
        b = BinlogPosition("binlog.000001", 900, other, OLD)
        with pytest.raises(PositionConflictError, match="two histories"):
            gtid.compare(a, b)
        with pytest.raises(PositionConflictError, match="two histories"):
            gtid.compare(b, a)


def test_a_state_that_lost_a_quiet_domain_compares_by_the_domains_both_carry() -> None:
    """A position an older setl wrote without a quiet domain (resumed where BINLOG_GTID_POS
    was NULL) is told by the domains both carry; the one only one carries decides only
    when those are even, and never against them."""
    full = BinlogPosition("binlog.000002", 500, "0-41-10,1-41-1", OLD)
    lost = BinlogPosition("binlog.000002", 800, "0-41-11", OLD)
    assert gtid.compare(full, lost) == -1 and gtid.compare(lost, full) == 1
    even = BinlogPosition("binlog.000002", 400, "0-41-10", OLD)
    assert gtid.compare(even, full) == -1  # domain 1 went on after it
    # neither carries what the other does: file/pos
    other = BinlogPosition("binlog.000002", 900, "0-41-10,2-41-7", OLD)
    assert gtid.compare(full, other) == -1 and gtid.compare(other, full) == 1


def test_advance_and_text() -> None:
    assert gtid.advance("0-41-5,1-41-2", "0-42-6") == "0-42-6,1-41-2"
    assert gtid.text(gtid.parse(" 1-2-3 ,0-1-9")) == "0-1-9,1-2-3"
    with pytest.raises(PositionConflictError, match="not a MariaDB GTID"):
        gtid.parse("3E11FA47-71CA-11E1-9E33-C80AA9429562:23")


def test_missing_names_what_the_new_primary_never_had() -> None:
    # the new primary replicated 0-41-… up to 103, then wrote 104.. itself
    assert gtid.missing("0-41-105", "0-41-103,0-42-110") == [
        "0-41-105 (it has server 41's transactions of domain 0 up to 0-41-103)"]
    assert gtid.missing("0-41-105", "0-41-105,0-42-110") == []
    assert gtid.missing("0-41-105,1-41-7", "0-41-105,1-41-6") == [
        "1-41-7 (it has server 41's transactions of domain 1 up to 1-41-6)"]
    assert gtid.missing("0-41-3", "") == ["0-41-3 (it has none of server 41's in domain 0)"]


def test_resume_after_a_switch_starts_at_the_earliest_target_by_gtid() -> None:
    """The hint and the rows name the old primary's binlog; the new primary's files mean
    nothing to them, so the start and the cuts are GTID states."""
    hint = Cursor(BinlogPosition("binlog.000009", 500, "0-41-50", OLD), 7, run="r")
    got = resume("c.p", hint, {
        "a": Cursor(BinlogPosition("binlog.000009", 900, "0-41-60", OLD), 9, run="r"),
        "b": Cursor(BinlogPosition("binlog.000001", 300, "0-41-55", NEW), 8, run="r")})
    assert got == Resume(Cursor(BinlogPosition("binlog.000001", 300, "0-41-55", NEW), 9,
                                run="r"),
                         (BinlogPosition("binlog.000009", 900, "0-41-60", OLD),))


def test_an_unnamed_position_beside_another_servers_compares_by_state() -> None:
    """A target's row written before rows named their server, at file 120 of the old
    primary, against a batch of the new one at file 3: by state the row is behind (by
    file/pos it was past every batch, and the target skipped them all)."""
    row = BinlogPosition("mysql-bin.000120", 500, gtid="0-1-5000")
    batch_end = BinlogPosition("mysql-bin.000003", 900, gtid="0-1-6001", server="2@h2:3306")
    assert gtid.compare(row, batch_end) == -1
    assert gtid.compare(batch_end, row) == 1
    same = BinlogPosition("mysql-bin.000120", 900, gtid="0-1-5001", server="1@h1:3306")
    assert gtid.compare(row, same) == -1
    # both unnamed: by their states too where they differ (file/pos where they are one)
    assert gtid.compare(row, BinlogPosition("mysql-bin.000003", 9, gtid="0-1-6001")) == -1
    assert gtid.compare(row, BinlogPosition("mysql-bin.000003", 9, gtid="0-1-5000")) == 1
    # GTIDs that are MySQL's: file/pos, as before
    mysql = BinlogPosition("bin.000120", 500, gtid="3e11fa47-71ca-11e1-9e33-c80aa9429562:5")
    assert gtid.compare(mysql, BinlogPosition("bin.000003", 9, gtid="3e11fa47-71ca-11e1-"
                                              "9e33-c80aa9429562:9", server="u2")) == 1


def test_diverged_names_gaps_no_catching_up_brings() -> None:
    """A gap whose domain the server went past with other transactions (two histories) is
    never filled; one it has not reached yet may still come."""
    assert gtid.diverged(["1-41-50 (it has server 41's …)"], "0-41-90,1-42-60") == [
        "1-41-50 (it is at 1-42-60 in domain 1)"]
    assert gtid.diverged(["1-41-50"], "0-41-90,1-42-50") == [
        "1-41-50 (it is at 1-42-50 in domain 1)"]  # the same number, another transaction
    assert gtid.diverged(["1-41-50"], "0-41-90,1-41-49") == []  # behind: catching up
    assert gtid.diverged(["1-41-50"], "0-41-90") == []


def test_unseen_domains_are_the_servers_domains_a_state_lacks() -> None:
    assert gtid.unseen_domains("0-41-100", "0-42-120,7-42-3") == {7: (42, 3)}
    assert gtid.unseen_domains("0-41-100,7-41-1", "0-42-120,7-42-3") == {}
    assert gtid.unseen_domains("0-41-100", "") == {}
