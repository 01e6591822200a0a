"""Switchover by GTID where a member's binlog is not the history its name or its settings
suggest, on real replica sets (each test its own): the old primary rejoined with its binlog
reset keeps its name; a promoted member without gtid_strict_mode may hold a local write the
targets' GTID state skips; a resume where MariaDB cannot say the GTID state of a position
(BINLOG_GTID_POS NULL) must not lose the domains the position had.

Most drive the steps a runner's start takes (check the member, resume, read the binlog,
ask Load whether a target holds each batch) rather than a whole pipeline: what each step
decides on these servers is what they assert; the failover to a member without strict mode
runs a pipeline with the workload over every table shape through it."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager import startcheck
from node.cursor import Cursor
from node.held import check_held
from node.select.binlog import BinlogReader
from shared import gtid, members
from shared.errors import PositionLostError
from shared.model import BinlogPosition, DataSource
from shared.positions import binlog_end, server_identity
from shared.sandbox import USER, Sandbox
from tests.devcluster import Cluster, Database, wait_equal, wait_for
from tests.integration.shapes import TABLES
from tests.integration.test_switchover import replica_set_source, shapes_on, start
from tests.replicaset import ReplicaSet


def replica_set(sandbox: Sandbox, tmp_path: Path, size: int) -> Iterator[ReplicaSet]:
    rs = ReplicaSet(tmp_path / "rs", sandbox.password(), members=size, owner_pid=os.getpid())
    rs.up()
    try:
        yield rs
    finally:
        rs.down()


@pytest.fixture
def two(sandbox: Sandbox, tmp_path: Path) -> Iterator[ReplicaSet]:
    yield from replica_set(sandbox, tmp_path, 2)


@pytest.fixture
def one(sandbox: Sandbox, tmp_path: Path) -> Iterator[ReplicaSet]:
    yield from replica_set(sandbox, tmp_path, 1)


def read_all(source: DataSource, start: BinlogPosition, schema: str,
             server_id: int) -> list[BinlogPosition]:
    """The end position of every transaction of ``schema`` from ``start`` to the binlog's
    end, as Select reads them."""
    reader = BinlogReader(source, server_id, start, lambda s, t: s == schema,
                          lambda s: s == schema, ddl=False, pipeline_id="sw.p")
    reader.begin()
    ends = []
    try:
        while (txn := reader.take(5)) is not None:
            ends.append(txn.end)
    finally:
        reader.stop()
    return ends


def test_a_quiet_row_of_the_rejoined_old_primarys_reset_binlog_stops_the_start(
        sandbox: Sandbox, two: ReplicaSet) -> None:
    """X primary, planned switch to Y; X rejoins as Y's replica after RESET MASTER (its
    binlog numbered again from binlog.000001, its name server_id@host:port the same); the
    primary is switched back to X. A target that got no rows in Y's time still holds its
    row of X's old binlog (binlog.000004): by file/pos it is past every batch of X's new
    binlog (Load would skip them all). The start there stops, naming the target, the row,
    the server and what to set, before anything is read."""
    rs = two
    x, y = rs.members[0].database(), rs.members[1].database()
    try:
        x.execute("CREATE DATABASE swid")
        x.execute("CREATE TABLE swid.t (id INT PRIMARY KEY, v VARCHAR(20))")
        for _ in range(3):
            x.execute("FLUSH BINARY LOGS")
        x.execute("INSERT INTO swid.t VALUES (1, 'x era')")
        with x.conn.cursor() as cursor:
            quiet_row = binlog_end(cursor, "source")  # the quiet target's row
            x_name = server_identity(cursor)
        rs.wait_caught_up(1)
        x.execute("SET GLOBAL read_only = ON")
        rs.promote(1)
        y.execute("INSERT INTO swid.t VALUES (2, 'y era')")
        with y.conn.cursor() as cursor:
            busy_row = binlog_end(cursor, "source")  # the cursor's and a busy target's
        # X rejoins as Y's replica, its binlog reset
        [(y_state,)] = y.rows("SELECT @@gtid_binlog_state")
        [(y_pos,)] = y.rows("SELECT @@gtid_binlog_pos")
        x.script("STOP SLAVE", "RESET SLAVE ALL", "RESET MASTER")
        x.execute("SET GLOBAL gtid_binlog_state = %s", (y_state,))
        x.execute("SET GLOBAL gtid_slave_pos = %s", (y_pos,))
        x.execute("CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s, "
                  "MASTER_USER = %s, MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos",
                  (rs.members[1].port, USER, sandbox.password()))
        x.execute("START SLAVE")
        rs.primary = 1
        y.execute("INSERT INTO swid.t VALUES (3, 'y era')")
        # the switch back to X
        y.execute("SET GLOBAL read_only = ON")
        rs.wait_caught_up(0)
        rs.promote(0)
        with x.conn.cursor() as cursor:
            assert server_identity(cursor) == x_name  # the same name, another binlog
        x.execute("INSERT INTO swid.t VALUES (4, 'x again')")
        x.execute("INSERT INTO swid.t VALUES (5, 'x again')")
    finally:
        x.close()
        y.close()
    assert quiet_row.file == "binlog.000004", quiet_row
    source = members.at(replica_set_source(sandbox, rs), rs.members[0].address)
    hint = Cursor(busy_row, 9, run="r", targets={"busy": busy_row, "quiet": quiet_row})
    rows = {"busy": Cursor(busy_row, 9, run="r"), "quiet": Cursor(quiet_row, 8, run="r")}
    ends = read_all(source, BinlogPosition(gtid=busy_row.gtid), "swid", 4244)
    assert [end.file for end in ends] == ["binlog.000001"] * 3, ends  # 3 (Y's), then 4, 5
    for end in ends:  # what the stop saves: by file/pos the row is past every batch
        assert gtid.compare(quiet_row, end) == 1, (quiet_row, end)
    with pytest.raises(PositionLostError) as refused:
        check_held("sw.p", source, hint, rows)
    message = str(refused.value)
    assert f"target quiet's position row is at {quiet_row}, of server {x_name}" in message, \
        message
    assert "binlog.000004 is not among its binlog files now (binlog.000001 to " in message
    assert "the server's binlog was reset or restarted" in message, message
    assert "setl position set sw/p --gtid STATE --replay" in message, message
    # the busy target alone (its row is Y's) goes on
    found, _, _ = check_held("sw.p", source, hint, {"busy": rows["busy"]})
    assert found.server == x_name


def test_target_rows_of_the_servers_binlog_now_pass_and_of_its_reset_one_stop(
        sandbox: Sandbox, one: ReplicaSet) -> None:
    """Rows of the server read now in a purged file, without a GTID state, or where MariaDB
    cannot say the state (BINLOG_GTID_POS NULL after a 32 MB event) start; after RESET
    MASTER a row in a file the new binlog has not reached stops, and so does one in a file
    of the new binlog whose state there is another."""
    db = one.members[0].database()
    try:
        db.execute("CREATE DATABASE swrows")
        db.execute("CREATE TABLE swrows.t (id INT PRIMARY KEY, b LONGBLOB)")
        db.execute("INSERT INTO swrows.t VALUES (1, 'one')")
        with db.conn.cursor() as cursor:
            purged = binlog_end(cursor, "source")
            server = server_identity(cursor)
        db.execute("FLUSH BINARY LOGS")
        db.execute("FLUSH BINARY LOGS")
        db.execute("INSERT INTO swrows.t VALUES (2, 'two')")
        with db.conn.cursor() as cursor:
            current = binlog_end(cursor, "source")
        db.execute("INSERT INTO swrows.t VALUES (3, REPEAT('x', 16000000))")
        db.execute("UPDATE swrows.t SET b = CONCAT(b, 'y') WHERE id = 3")  # a 32 MB event
        [(file, pos, *_)] = db.rows("SHOW MASTER STATUS")
        assert db.rows("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos)) == [(None,)]
        [(state,)] = db.rows("SELECT @@gtid_binlog_pos")
        unknown = BinlogPosition(file, pos, state, server)

        def purge() -> bool:  # (a file is kept until its binlog checkpoint is written)
            db.execute(f"PURGE BINARY LOGS TO '{current.file}'")
            return purged.file not in {row[0] for row in db.rows("SHOW BINARY LOGS")}
        wait_for(purge, 30, f"{purged.file} to be purged")
        source = replica_set_source(sandbox, one)
        rows = {"purged": Cursor(purged, 1, run="r"), "current": Cursor(current, 2, run="r"),
                "stateless": Cursor(BinlogPosition(current.file, current.pos, "", server),
                                    2, run="r"),
                "unknown": Cursor(unknown, 3, run="r")}
        hint = Cursor(unknown, 3, run="r")
        found, _, kept = check_held("sw.p", source, hint, rows)
        assert found.server == server and kept == rows
        # the binlog starts again under the same name
        [(binlog_state,)] = db.rows("SELECT @@gtid_binlog_state")
        db.execute("RESET MASTER")
        db.execute("SET GLOBAL gtid_binlog_state = %s", (binlog_state,))
        for n in range(4, 40):
            db.execute("INSERT INTO swrows.t VALUES (%s, 'new binlog')", (n,))
        [(file, size)] = db.rows("SHOW BINARY LOGS")[-1:]
        assert file == purged.file and size > purged.pos, (file, size, purged)
        with db.conn.cursor() as cursor:
            end = binlog_end(cursor, "source")
    finally:
        db.close()
    for name, why in (("current", f"{current.file} is not among its binlog files now"),
                      ("purged", f"at {purged.file}:{purged.pos} ")):
        with pytest.raises(PositionLostError) as refused:
            check_held("sw.p", source, Cursor(end, 3, run="r"), {name: rows[name]})
        message = str(refused.value)
        assert f"target {name}'s position row is at {rows[name].position}" in message, message
        assert why in message and "binlog was reset or restarted" in message, message


def test_a_member_without_gtid_strict_mode_is_refused_before_its_local_write_is_skipped(
        sandbox: Sandbox, two: ReplicaSet) -> None:
    """The replica runs with gtid_strict_mode OFF and takes a local write (0-42-N) before it
    replicates the primary's 0-41-N; the targets hold 0-41-N. The primary dies, the replica
    is promoted: it holds every GTID the targets hold, so nothing looks missing, and a
    stream from their state would never send the local write. The start there stops,
    saying what to set; the channel start's check names that member beforehand."""
    rs = two
    old, new = rs.members[0].database(), rs.members[1].database()
    try:
        new.execute("SET GLOBAL gtid_strict_mode = OFF")
        read_now = members.at(replica_set_source(sandbox, rs), rs.members[0].address)
        said = startcheck.member_findings("sw.p", read_now)
        assert [(where, f.what, f.severity) for where, f in said] == [
            (f"source source ({rs.members[1].address})", "gtid_strict_mode", "error")], said
        old.execute("CREATE DATABASE swstrict")
        old.execute("CREATE TABLE swstrict.t (id INT PRIMARY KEY, v VARCHAR(20))")
        old.execute("INSERT INTO swstrict.t VALUES (1, 'one')")
        rs.wait_caught_up(1)
        new.execute("INSERT INTO swstrict.t VALUES (99, 'errant')")  # local, domain 0
        old.execute("INSERT INTO swstrict.t VALUES (2, 'two')")
        rs.wait_caught_up(1)
        with old.conn.cursor() as cursor:
            held = binlog_end(cursor, "source")  # a target loaded all of the old primary
        [(state,)] = new.rows("SELECT @@gtid_binlog_state")
        assert gtid.missing(held.gtid, state) == [], (held, state)  # nothing looks lost
    finally:
        old.close()
    rs.kill(0)
    rs.promote(1)
    new.execute("INSERT INTO swstrict.t VALUES (3, 'after')")
    new.close()
    source = members.at(replica_set_source(sandbox, rs), rs.members[1].address)
    with pytest.raises(PositionLostError) as refused:
        check_held("sw.p", source, Cursor(held, 7, run="r"),
                           {"target": Cursor(held, 7, run="r")})
    message = str(refused.value)
    assert f"the pipeline would go on at {rs.members[1].address}, which runs with " \
        "gtid_strict_mode = OFF" in message, message
    assert "SET GLOBAL gtid_strict_mode = ON" in message, message


def test_a_failover_to_a_member_without_strict_mode_pauses_the_pipeline_before_it_reads(
        sandbox: Sandbox, two: ReplicaSet, tmp_path: Path) -> None:
    """The workload runs on the primary; the replica's gtid_strict_mode is turned OFF and it
    takes a local write (before the primary's next transaction, which it replicates after
    it); the target loads all of the primary's. The primary dies, the replica is promoted,
    the workload goes on there: the node would find nothing missing and skip the local
    write for good, so it pauses the pipeline instead, saying what to set, and the target
    keeps exactly the old primary's rows (multisets), its readers' promises kept."""
    rs, target = two, Database(sandbox, "target")
    shapes = shapes_on(sandbox, rs, target)
    cluster = Cluster(sandbox, tmp_path / "cluster", "switch-strict")
    t = f"`{shapes.schema}`.kl"
    try:
        start(cluster, sandbox, rs, shapes, "switchstrict")
        shapes.start()
        shapes.wait_transactions(150)
        shapes.pause()
        rs.wait_caught_up(1)
        replica, old = rs.members[1].database(), rs.members[0].database()
        try:
            replica.execute("SET GLOBAL gtid_strict_mode = OFF")
            replica.execute(f"INSERT INTO {t} VALUES (3000, 'local')")  # 0-42-N+1
            old.execute(f"INSERT INTO {t} VALUES (1000, 'primary')")  # 0-41-N+1, after it
            rs.wait_caught_up(1)
            wait_equal(old, target, shapes.schema, TABLES)
        finally:
            replica.close()
            old.close()
        held = {name: Counter(target.table(shapes.schema, name)) for name in TABLES}
        rs.kill(0)
        rs.promote(1)
        shapes.start()  # on the promoted replica, racing the pause
        wait_for(lambda: cluster.channel_status("switchstrict") == "PAUSE", 90,
                 "the pipeline to pause on the member without strict mode")
        error = cluster.pipeline_state("switchstrict").last_error
        assert f"setl would switch to {rs.members[1].address}, which runs with " \
            "gtid_strict_mode = OFF" in error, error
        shapes.keep_on()
        shapes.stop()
        assert target.rows(f"SELECT COUNT(*) FROM {t} WHERE a = 3000")[0][0] == 0
        assert {name: Counter(target.table(shapes.schema, name)) for name in TABLES} == held
        assert shapes.violations == [] and shapes.snapshots > 20, shapes.violations
    finally:
        shapes.stop()
        cluster.stop()
        target.close()


def test_positions_read_after_a_null_binlog_gtid_pos_keep_every_domain(
        sandbox: Sandbox, one: ReplicaSet) -> None:
    """A resume at an offset where BINLOG_GTID_POS is NULL (an event larger than
    max_allowed_packet earlier in the file: an UPDATE of a 16 MB blob) on a source with two
    GTID domains: the positions of the transactions read from there keep the quiet domain
    (the state stored with the start), as the server's gtid_binlog_pos does; without it a
    switch would take the domain's transactions for missing, or replay them."""
    db = one.members[0].database()
    try:
        db.execute("CREATE DATABASE swdom")
        db.execute("CREATE TABLE swdom.t (id INT PRIMARY KEY, b LONGBLOB)")
        db.execute("SET SESSION gtid_domain_id = 1")  # a second writer's domain
        db.execute("INSERT INTO swdom.t VALUES (100, 'domain one')")
        db.execute("SET SESSION gtid_domain_id = 0")
        db.execute("INSERT INTO swdom.t VALUES (1, REPEAT('x', 16000000))")
        db.execute("UPDATE swdom.t SET b = CONCAT(b, 'y') WHERE id = 1")  # a 32 MB event
        [(file, pos, *_)] = db.rows("SHOW MASTER STATUS")
        [(state,)] = db.rows("SELECT @@gtid_binlog_pos")
        assert sorted(gtid.parse(state)) == [0, 1], state
        assert db.rows("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos)) == [(None,)]
        with db.conn.cursor() as cursor:
            server = server_identity(cursor)
        db.execute("INSERT INTO swdom.t VALUES (2, 'after')")
        [(after,)] = db.rows("SELECT @@gtid_binlog_pos")
    finally:
        db.close()
    start = BinlogPosition(file, pos, state, server)  # a target's row there
    [end] = read_all(replica_set_source(sandbox, one), start, "swdom", 4242)
    assert gtid.parse(end.gtid) == gtid.parse(after), (end, after)
