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


def test_positions_of_one_server_compare_by_file_pos_whatever_their_states() -> None:
    """Under gtid_strict_mode OFF (MariaDB's default) one domain of a server's binlog may
    carry two origins' sequences (a multi-source replica whose masters both write domain
    0): 0-2-31 comes after 0-1-5000. By state the later transaction was taken for one the
    target held, and its batch skipped; file/pos order them."""
    held = BinlogPosition("binlog.000003", 1200, "0-1-5000", OLD)
    later = BinlogPosition("binlog.000003", 1600, "0-2-31", OLD)
    assert gtid.compare(held, later) == -1 and gtid.compare(later, held) == 1
    # states of two histories at two places of one binlog: file/pos, never a raise
    assert gtid.compare(BinlogPosition("binlog.000001", 900, "0-41-10,1-41-4", OLD),
                        BinlogPosition("binlog.000004", 620, "0-41-9,1-41-5", OLD)) == -1


def test_a_state_that_lost_a_quiet_domain_at_the_same_place_is_the_same_position() -> None:
    """A position written without a quiet domain (resumed where BINLOG_GTID_POS was NULL)
    at the same file/pos as one with it is the same position (a cut there is reached)."""
    full = BinlogPosition("binlog.000002", 800, "0-41-11,1-41-1", OLD)
    lost = BinlogPosition("binlog.000002", 800, "0-41-11", OLD)
    assert gtid.compare(full, lost) == 0 and gtid.compare(lost, full) == 0
    assert gtid.compare(lost, BinlogPosition("binlog.000002", 500, "0-41-10,1-41-1", OLD)) == 1


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
    # both unnamed, or GTIDs that are MySQL's: file/pos, as before
    assert gtid.compare(row, BinlogPosition("mysql-bin.000003", 9, gtid="0-1-6001")) == 1
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
