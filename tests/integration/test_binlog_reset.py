"""A source whose binlog was reset (RESET MASTER) while its channel stood: the server keeps
its name (server_id@host:port), the binlog grew past the stored position and its GTID
sequences passed the stored ones, so nothing but the GTID state at the stored offset tells
the two histories apart. The resume pauses, saying so, and the target keeps exactly what it
held: no row of the new history is loaded from an arbitrary offset of it.

A private one-member replica set is the source: the shared sandbox's source is never reset."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from shared import gtid
from shared.errors import PositionConflictError
from shared.model import BinlogPosition
from shared.positions import binlog_end, check_start, server_identity
from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, wait_for
from tests.integration.shapes import Shapes
from tests.integration.test_switchover import (
    create_select_refused,
    items_and_a_held_copy,
    shapes_on,
    start,
)
from tests.replicaset import ReplicaSet

NAMES = {False: "binlogreset", True: "binlogresetat"}  # unique across the tests
AT_FILE_START = "binlogresetstart"


@pytest.fixture
def private_source(sandbox: Sandbox, tmp_path: Path) -> Iterator[ReplicaSet]:
    rs = ReplicaSet(tmp_path / "rs", sandbox.password(), members=1, owner_pid=os.getpid())
    rs.up()
    try:
        yield rs
    finally:
        rs.down()


def past(source: Database, stored: Any) -> bool:
    """Whether the source's binlog grew past the stored offset (in its file) and its GTID
    sequences past the stored ones, with room to spare."""
    [(end_file, end_pos, *_)] = source.rows("SHOW MASTER STATUS")
    [(now,)] = source.rows("SELECT @@gtid_binlog_pos")
    ahead = gtid.parse(now)
    return end_file == stored.file and end_pos > stored.pos + 10000 and all(
        d in ahead and ahead[d][1] > seq + 20 for d, (_, seq) in gtid.parse(stored.gtid).items())


@contextmanager
def settled(sandbox: Sandbox, rs: ReplicaSet, tmp_path: Path, name: str, transactions: int
            ) -> Iterator[tuple[Shapes, Database, Database, Cluster]]:
    """The workload's channel ``name`` from ``rs`` to the target (shapes, source, target,
    cluster), run while ``transactions`` are written and the watcher reads the target,
    then settled: writes stop, the target equals the source (multisets) and the stored
    position is at the source's last transaction. All stopped and closed at the end."""
    target = Database(sandbox, "target")
    shapes = shapes_on(sandbox, rs, target)
    source = rs.members[0].database()
    cluster = Cluster(sandbox, tmp_path / "cluster", name)
    try:
        start(cluster, sandbox, rs, shapes, name)
        shapes.start()
        shapes.keep_on(transactions, 25)
        shapes.settle(source)
        [(written,)] = source.rows("SELECT @@gtid_binlog_pos")
        wait_for(lambda: cluster.pipeline_state(name).position.gtid == written, 60,
                 "the stored position at the source's last transaction")
        yield shapes, source, target, cluster
    finally:
        shapes.stop()
        cluster.stop()
        source.close()
        target.close()


def held(shapes: Shapes, target: Database) -> dict[str, Counter[tuple[Any, ...]]]:
    """The workload's tables on the target, as multisets."""
    return {t: Counter(rows) for t, rows in shapes.rows(target).items()}


def land(source: Database, pos: int) -> None:
    """Statements of a table no channel takes (a GTID event and a query event each, of a
    length set by a comment) until the binlog ends exactly at ``pos``: the stored offset is
    an event's start, a transaction's, in the new history."""
    source.execute("CREATE DATABASE IF NOT EXISTS setlpad")
    each = 0  # a statement's bytes besides its comment
    while True:
        [(_, end, *_)] = source.rows("SHOW MASTER STATUS")
        gap = pos - end
        if gap == 0:
            return
        assert gap > 0 and (not each or gap >= each), f"cannot land at {pos} from {end}"
        comment = 0 if not each else min(gap - each, 1000) if gap >= 2 * each + 1000 or \
            gap - each <= 1000 else gap - 2 * each
        source.execute(f"CREATE OR REPLACE TABLE setlpad.t (a INT) COMMENT '{'x' * comment}'")
        [(_, after, *_)] = source.rows("SHOW MASTER STATUS")
        each = after - end - comment


@pytest.mark.parametrize("at_an_event", [False, True], ids=["inside an event", "at one"])
def test_a_resume_after_reset_master_pauses_and_loads_nothing_of_the_new_history(
        sandbox: Sandbox, private_source: ReplicaSet, tmp_path: Path,
        at_an_event: bool) -> None:
    """``at one``: the stored offset is a transaction's start in the new history, which the
    stream read from, silently, as the old history's next transaction; ``inside an event``:
    no event begins there (the server's refusal said the position was lost, purged). The
    new history is made to meet the offset as each case says (left to chance, the offset
    fell on an event's start in one CI run)."""
    name = NAMES[at_an_event]
    with settled(sandbox, private_source, tmp_path, name, 60) as (shapes, source, target,
                                                                   cluster):
        cluster.nodes[1].kill()
        stored = cluster.pipeline_state(name).position
        before = held(shapes, target)
        assert stored.gtid and sum(before.values(), Counter())
        # the reset, with the stored file's name made again: the stream opens inside it
        number = int(stored.file.rsplit(".", 1)[1])
        source.execute(f"RESET MASTER TO {number}")
        # at one: the binlog ends at the offset; inside one: 20 bytes before it, and any
        # event (38 bytes or more: a GTID event's) written next spans it
        land(source, stored.pos if at_an_event else stored.pos - 20)
        shapes.start()  # more transactions than before: past the stored offset and seq
        wait_for(lambda: past(source, stored), 120, "the new history past the stored one")
        shapes.pause()
        cluster.start_node(2)
        wait_for(lambda: cluster.channel_status(name) == "PAUSE", 120, "the pause")
        message = cluster.pipeline_state(name).last_error
        # the target's row (at the stored position) stops the start, before the stream
        for part in (f"target target's position row is at {stored.file}:{stored.pos} gtid="
                     f"{stored.gtid}, of server {stored.server}",
                     f"at {stored.file}:{stored.pos} the server's GTID state there is 0-41-"
                     if at_an_event else f"no event begins at {stored.file}:{stored.pos}",
                     "RESET MASTER", "Nothing was read",
                     f"setl position set {name}/forward --gtid STATE --replay"):
            assert part in message, (part, message)
        assert held(shapes, target) == before
        assert shapes.violations == []


def test_a_resume_at_a_files_start_after_reset_master_pauses(
        sandbox: Sandbox, private_source: ReplicaSet, tmp_path: Path) -> None:
    """An idle pipeline's position rows follow the source's rotations to a file's start
    (offset 4). After RESET MASTER the new history, numbered again past that file, has a
    file of that name too: the start compares the file's GTID list with the stored state
    and pauses, before the stream reads the new history's later files as the old one's."""
    name = AT_FILE_START
    with settled(sandbox, private_source, tmp_path, name, 30) as (shapes, source, target,
                                                                   cluster):
        for _ in range(2):
            source.execute("FLUSH BINARY LOGS")
        [(current, *_)] = source.rows("SHOW MASTER STATUS")
        wait_for(lambda: (cluster.pipeline_state(name).position.file,
                          cluster.pipeline_state(name).position.pos) == (current, 4), 60,
                 "the idle position to follow the rotations")
        cluster.nodes[1].kill()
        stored = cluster.pipeline_state(name).position
        before = held(shapes, target)
        source.execute("RESET MASTER")
        shapes.start()  # the new history, past the stored file and its sequences
        while source.rows("SHOW MASTER STATUS")[0][0] != stored.file:
            shapes.keep_on(20, 25)
            source.execute("FLUSH BINARY LOGS")
        wait_for(lambda: past(source, BinlogPosition(stored.file, 4, stored.gtid)), 120,
                 "the new history past the stored sequences")
        shapes.pause()
        cluster.start_node(2)
        wait_for(lambda: cluster.channel_status(name) == "PAUSE", 120, "the pause")
        message = cluster.pipeline_state(name).last_error
        for part in (f"{stored.file}:4", "the server's GTID state there is", "RESET MASTER",
                     "Nothing was read"):
            assert part in message, (part, message)
        assert held(shapes, target) == before
        assert shapes.violations == []


def test_a_resume_inside_a_create_select_after_its_statement_is_not_refused(
        sandbox: Sandbox, private_source: ReplicaSet, tmp_path: Path) -> None:
    """CREATE TABLE … SELECT is one group: the statement, then its rows. The target takes the
    statement and refuses the rows (a CHECK, for the while), so its position stands after the
    statement, inside the group, with the state before it; the server's state there counts
    the group's GTID, and no GTID event comes before the rows. The node is killed; the next
    one resumes there on the same server and loads the rows."""
    rs, target = private_source, Database(sandbox, "target")
    shapes = shapes_on(sandbox, rs, target)
    s = shapes.schema
    items_and_a_held_copy(rs, target, s)
    source = rs.members[0].database()
    cluster = Cluster(sandbox, tmp_path / "cluster", "binlogctas")
    try:
        start(cluster, sandbox, rs, shapes, "binlogctas", "copied", ddl_sync=True)
        shapes.start()
        shapes.wait_transactions(30)
        create_select_refused(cluster, rs, s, "binlogctas")
        cluster.nodes[1].kill()
        target.execute(f"ALTER TABLE `{s}`.copied DROP CONSTRAINT not_yet")
        cluster.start_node(2)
        if cluster.channel_status("binlogctas") == "PAUSE":
            cluster.set_status("binlogctas", "START")
        wait_for(lambda: sorted(target.table(s, "copied")) ==
                 [(1, "one"), (2, "two"), (3, "three")], 120, "the copied rows")
        assert "another history" not in cluster.pipeline_state("binlogctas").last_error
        shapes.keep_on(30, 25)
        shapes.finish(source)
    finally:
        shapes.stop()
        cluster.stop()
        source.close()
        target.close()


def test_a_resume_after_an_event_over_max_allowed_packet_is_not_refused(
        private_source: ReplicaSet) -> None:
    """MariaDB's BINLOG_GTID_POS scans the file from its start and gives NULL at every
    offset after an event larger than the asking connection's max_allowed_packet (16 MiB:
    here a 32 MiB update, the row's before and after images): the clean-clone CI's shared
    source had such events early in binlog.000001, and every resume past them was refused
    as 'no event begins there now'. An event begins there: the resume goes on; an offset
    inside one is refused still."""
    source = private_source.members[0].database()
    try:
        source.execute("CREATE DATABASE setlbig")
        source.execute("CREATE TABLE setlbig.t (id INT PRIMARY KEY, b LONGBLOB)")
        source.execute("INSERT INTO setlbig.t VALUES (1, REPEAT('x', 16000000))")
        source.execute("UPDATE setlbig.t SET b = CONCAT(b, 'y') WHERE id = 1")
        [(_, start, *_)] = source.rows("SHOW MASTER STATUS")  # the next transaction's
        source.execute("INSERT INTO setlbig.t VALUES (2, 'after')")
        [(file, end, *_)] = source.rows("SHOW MASTER STATUS")
        [(state,)] = source.rows("SELECT @@gtid_binlog_pos")
        [(packet,)] = source.rows("SELECT @@max_allowed_packet")
        assert packet < 32_000_000
        [(null,)] = source.rows("SELECT BINLOG_GTID_POS(%s, %s)", (file, end))
        assert null is None  # the server's own answer at its binlog's end
        with source.conn.cursor() as cursor:  # a start at latest still carries its state
            assert binlog_end(cursor, "source") == BinlogPosition(
                file, end, state, server_identity(cursor))
        at = BinlogPosition(file, start, state, "")
        with source.conn.cursor() as cursor:
            assert check_start(cursor, BinlogPosition(file, end, state, ""), "p", "c/p") \
                == (False, "")  # (NULL at the end too: its state is unknown, not another)
            assert check_start(cursor, at, "p", "c/p") == (False, "")
            with pytest.raises(PositionConflictError, match="no event begins there now"):
                check_start(cursor, BinlogPosition(file, start + 7, state, ""), "p", "c/p")
    finally:
        source.close()
