"""Source switchover: a pipeline whose source is a replica set follows the primary to the
promoted replica by GTID — after a crash by itself (here with a kill -9 of the node in the
middle of the switch), and on ``setl source switch`` for a planned one — with the workload
over every table shape running, the target's readers watched, and the target equal to the
new primary as multisets; a replica that lacked the old primary's last transactions is
reported, never hidden.

Each test has its own replica set (primary rs0, GTID replica rs1, gtid_strict_mode)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from manager import cli
from shared import members
from shared.model import DataSource
from shared.rpc import manager_pb2
from shared.sandbox import Sandbox
from shared.secrets import SecretRef
from tests.devcluster import Cluster, Database, wait_equal, wait_for
from tests.integration.shapes import TABLES, Shapes, channel
from tests.integration.test_check import check
from tests.integration.test_verify import verify
from tests.replicaset import ReplicaSet

SWITCH_AFTER_S = 2
ITEMS = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(40))"


@pytest.fixture
def replica_set(sandbox: Sandbox, tmp_path: Path) -> Iterator[ReplicaSet]:
    rs = ReplicaSet(tmp_path / "rs", sandbox.password(), owner_pid=os.getpid())
    rs.up()
    try:
        yield rs
    finally:
        rs.down()


def sources(sandbox: Sandbox, rs: ReplicaSet) -> list[dict[str, object]]:
    secret = f"file:{sandbox.secret_file}"
    return [{"name": "source", "hosts": [m.address for m in rs.members], "user": "setl",
             "password": secret, "switch_after_s": SWITCH_AFTER_S},
            {"name": "target", "host": "127.0.0.1", "port": sandbox.servers()["target"].port,
             "user": "setl", "password": secret}]


def replica_set_source(sandbox: Sandbox, rs: ReplicaSet) -> DataSource:
    return DataSource("source", "127.0.0.1", rs.members[0].port, "setl",
                      SecretRef(f"file:{sandbox.secret_file}"),
                      hosts=tuple(m.address for m in rs.members))


def start(cluster: Cluster, sandbox: Sandbox, rs: ReplicaSet, shapes: Shapes,
          name: str, *more: str, **params: object) -> None:
    """A manager, node 1, and the workload's channel (with the tables ``more``)."""
    cluster.start_manager()
    cluster.start_node(1)
    definition = channel(name, shapes.schema, **params)
    definition["pipelines"][0]["pairs"] += [  # type: ignore[index]
        {"source": f"{shapes.schema}.{t}", "target": f"{shapes.schema}.{t}"} for t in more]
    cluster.apply([definition], sources(sandbox, rs))
    cluster.set_status(name, "START")
    cluster.wait_running(name)


def shapes_on(sandbox: Sandbox, rs: ReplicaSet, target: Database) -> Shapes:
    """The workload written to whichever member is the primary at the moment."""
    primary = rs.members[0].database()
    try:
        return Shapes(sandbox, primary, target,
                      writer=lambda: rs.members[rs.primary].database())
    finally:
        primary.close()


def finished_on_the_new_primary(cluster: Cluster, rs: ReplicaSet, shapes: Shapes,
                                name: str) -> manager_pb2.PipelineState:
    """More writes on the promoted rs1, then the workload's end: the target equals rs1 as
    multisets and no reader saw a broken promise; the pipeline runs there, as status says."""
    shapes.wait_transactions(shapes.transactions + 150)
    new_primary = rs.members[1].database()
    try:
        shapes.finish(new_primary)
    finally:
        new_primary.close()
    wait_for(lambda: cluster.pipeline_state(name).position.server.startswith("42@"), 30,
             "the status to show the new primary's position")
    state = cluster.pipeline_state(name)
    assert (state.state, state.source) == ("running", rs.members[1].address)
    return state


def test_a_crashed_primary_is_followed_to_the_promoted_replica_through_a_node_kill(
        sandbox: Sandbox, replica_set: ReplicaSet, tmp_path: Path) -> None:
    """The primary is killed in the middle of a table copy; the node, waiting out
    switch_after_s, is killed -9 too; the replica is promoted and the writes go on there; a
    new node finds the new primary by itself, goes on from the GTID state the target holds,
    and the copy goes on there with the chunks not done."""
    rs, target = replica_set, Database(sandbox, "target")
    shapes = shapes_on(sandbox, rs, target)
    primary = rs.members[0].database()
    for db in (primary, target):
        db.execute(ITEMS.format(schema=shapes.schema))
    primary.execute(f"INSERT INTO `{shapes.schema}`.items SELECT seq, CONCAT('item ', seq) "
                    f"FROM `{shapes.schema}`.seq_1_to_20000")
    primary.close()
    cluster = Cluster(sandbox, tmp_path / "cluster", "switch-auto")
    try:
        start(cluster, sandbox, rs, shapes, "switchauto", "items", snapshot_chunk_size=200,
              snapshot_parallelism=1)
        shapes.start()
        cluster.call("Snapshot", manager_pb2.SnapshotRequest(
            channel="switchauto", pipeline="forward", table=f"{shapes.schema}.items"))
        wait_for(lambda: any(c.chunks_done >= 10 for c in
                             cluster.pipeline_state("switchauto").snapshots), 120,
                 "ten chunks of the copy on the target")
        shapes.wait_transactions(150)
        shapes.pause()  # the replica gets all: nothing is lost in this crash
        frozen = rs.members[0].database()  # nor setl's own watermarks: they wait from here
        frozen.execute("FLUSH TABLES WITH READ LOCK")
        rs.wait_caught_up(1)
        rs.kill(0)
        with contextlib.suppress(Exception):
            frozen.close()
        shapes.start()  # the writer waits for a primary
        wait_for(lambda: cluster.pipeline_state("switchauto").state == "switching", 60,
                 "the pipeline to notice the lost primary")
        cluster.nodes[1].kill()  # in the middle of the switch
        rs.promote(1)
        cluster.start_node(2)
        state = finished_on_the_new_primary(cluster, rs, shapes, "switchauto")
        assert f"to {rs.members[1].address} (auto) at GTID 0-41-" in state.switched, \
            state.switched
        new_primary = rs.members[1].database()
        try:
            wait_equal(new_primary, target, shapes.schema, ["items"], 120)
        finally:
            new_primary.close()
        wait_for(lambda: [c.state for c in cluster.pipeline_state("switchauto").snapshots]
                 == ["done"], 60, "the copy done")
    finally:
        shapes.stop()
        cluster.stop()
        target.close()


def test_a_demoted_primary_left_up_is_left_for_the_promoted_replica(
        sandbox: Sandbox, replica_set: ReplicaSet, tmp_path: Path) -> None:
    """An HA tool fails over and leaves the old primary up, read-only, with no 'setl source
    switch': the binlog connection never breaks, yet the pipeline goes on at the promoted
    replica by itself (the writes there would never come otherwise, with status green)."""
    rs, target = replica_set, Database(sandbox, "target")
    shapes = shapes_on(sandbox, rs, target)
    cluster = Cluster(sandbox, tmp_path / "cluster", "switch-demoted")
    try:
        start(cluster, sandbox, rs, shapes, "switchdemoted")
        shapes.start()
        shapes.wait_transactions(150)
        shapes.pause()
        old = rs.members[0].database()
        old.execute("SET GLOBAL read_only = ON")  # demoted, and still up
        old.close()
        rs.wait_caught_up(1)
        rs.promote(1)
        shapes.start()
        state = finished_on_the_new_primary(cluster, rs, shapes, "switchdemoted")
        assert f"to {rs.members[1].address} (auto)" in state.switched, state.switched
    finally:
        shapes.stop()
        cluster.stop()
        target.close()


def test_a_planned_switch_moves_the_pipeline_once_it_loaded_what_it_read(
        sandbox: Sandbox, replica_set: ReplicaSet, tmp_path: Path, capsys: Any) -> None:
    """setl source switch: the old primary stays up (read-only), the pipeline loads what it
    selected there and goes on at the promoted replica; a member that is not promoted, or
    no member at all, is refused with what to do."""
    rs, target = replica_set, Database(sandbox, "target")
    shapes = shapes_on(sandbox, rs, target)
    cluster = Cluster(sandbox, tmp_path / "cluster", "switch-planned")
    try:
        start(cluster, sandbox, rs, shapes, "switchplanned")
        code, report = check(cluster, capsys, "source", "source")  # every member: ready
        assert code == 0 and [m["member"] for m in report["members"]] == \
            [m.address for m in rs.members], report
        replica = rs.members[1].database()
        replica.execute("SET GLOBAL gtid_strict_mode = OFF")  # a member setl cannot follow
        code, report = check(cluster, capsys, "source", "source")
        replica.execute("SET GLOBAL gtid_strict_mode = ON")
        replica.close()
        assert code == 1 and [f["what"] for f in report["members"][1]["findings"]
                              if f["severity"] == "error"] == ["gtid_strict_mode"], report
        shapes.start()
        shapes.wait_transactions(150)
        with pytest.raises(Exception, match="is read-only; promote it first"):
            cluster.call("SwitchSource", manager_pb2.SwitchSourceRequest(
                name="source", to=rs.members[1].address))
        with pytest.raises(Exception, match="is not one of its hosts"):
            cluster.call("SwitchSource", manager_pb2.SwitchSourceRequest(
                name="source", to="127.0.0.1:1"))
        shapes.pause()
        old = rs.members[0].database()
        old.execute("SET GLOBAL read_only = ON")  # the planned way: writes stop, it drains
        old.close()
        rs.wait_caught_up(1)
        rs.promote(1)
        # who the primary is: the writable member, or the first that answers (order)
        defined = replica_set_source(sandbox, rs)
        assert members.address(members.find_primary(defined)[0]) == rs.members[1].address
        ordered = dataclasses.replace(defined, primary="order")
        assert members.address(members.find_primary(ordered)[0]) == rs.members[0].address
        answer = cluster.call("SwitchSource", manager_pb2.SwitchSourceRequest(
            name="source", to=rs.members[1].address))
        assert (answer.member, answer.previous) == (rs.members[1].address,
                                                    rs.members[0].address)
        shapes.start()
        state = finished_on_the_new_primary(cluster, rs, shapes, "switchplanned")
        assert "(manual)" in state.switched, state.switched
        # verify reads the new primary and waits on positions of its binlog
        code, report = verify(cluster, capsys, "switchplanned", "--table",
                              f"{shapes.schema}.accounts")
        [verdict] = [t for r in report["reports"] for t in r.get("tables", [])]
        assert code == 0 and verdict["rows"] == 20, report
    finally:
        shapes.stop()
        cluster.stop()
        target.close()


def test_transactions_the_promoted_replica_never_got_are_reported(
        sandbox: Sandbox, replica_set: ReplicaSet, tmp_path: Path, capsys: Any) -> None:
    """The replica stops replicating; the primary commits more (setl loads them), then
    crashes; the replica is promoted and writes its own transactions under the same GTID
    numbers. Going on would leave the lost rows on the target: the pipeline pauses and names
    the GTIDs the new primary lacks. The workload runs on the old primary (equal on the
    target as multisets before the crash) and goes on at the promoted one, racing the pause:
    the target keeps the old primary's rows, none of the new one's, its promises kept."""
    rs, target = replica_set, Database(sandbox, "target")
    shapes = shapes_on(sandbox, rs, target)
    cluster = Cluster(sandbox, tmp_path / "cluster", "switch-lost")
    t = f"`{shapes.schema}`.kl"
    try:
        start(cluster, sandbox, rs, shapes, "switchlost")
        shapes.start()
        shapes.wait_transactions(150)
        shapes.pause()  # the replica gets these: the lost ones are the three below alone
        rs.wait_caught_up(1)
        rs.pause_replication(1)
        old = rs.members[0].database()
        for n in range(3):
            old.execute(f"INSERT INTO {t} VALUES (1000, 'lost {n}')")
        lost = old.rows("SELECT @@gtid_binlog_pos")[0][0]
        wait_equal(old, target, shapes.schema, TABLES)
        old.close()
        held = {name: Counter(target.table(shapes.schema, name)) for name in TABLES}
        rs.kill(0)
        rs.promote(1)
        shapes.start()  # on the promoted replica
        new = rs.members[1].database()
        new.execute(f"INSERT INTO {t} VALUES (2000, 'its own')")
        new.close()
        wait_for(lambda: cluster.channel_status("switchlost") == "PAUSE", 90,
                 "the pipeline to pause on the lost transactions")
        error = cluster.pipeline_state("switchlost").last_error
        last = lost.split("-")[-1]
        assert "never had transactions the pipeline already replicated" in error, error
        assert f"target target holds 0-41-{last} (it has server 41's transactions of " \
            f"domain 0 up to 0-41-{int(last) - 3})" in error, (lost, error)
        assert target.rows(f"SELECT COUNT(*) FROM {t} WHERE a = 2000")[0][0] == 0
        shapes.keep_on()
        shapes.stop()
        assert {name: Counter(target.table(shapes.schema, name)) for name in TABLES} == held
        assert shapes.violations == [] and shapes.snapshots > 20, shapes.violations
        code, report = check(cluster, capsys, "source", "source")  # the dead member said
        errors = [[f["what"] for f in member["findings"] if f["severity"] == "error"]
                  for member in report["members"]]
        assert code == 1 and errors == [["connection"], []], report
    finally:
        shapes.stop()
        cluster.stop()
        target.close()


def items_and_a_held_copy(rs: ReplicaSet, target: Database, s: str) -> None:
    """The primary's items with three rows, and the target's table a CREATE … SELECT of them
    makes, refusing rows for the while (a CHECK the test drops)."""
    primary = rs.members[0].database()
    try:
        primary.execute(ITEMS.format(schema=s))
        primary.execute(f"INSERT INTO `{s}`.items VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    finally:
        primary.close()
    target.execute(f"CREATE TABLE `{s}`.copied (id INT PRIMARY KEY, name VARCHAR(40), "
                   "CONSTRAINT not_yet CHECK (id < 0))")


def create_select_refused(cluster: Cluster, rs: ReplicaSet, s: str, channel: str) -> None:
    """The CREATE … SELECT on the primary: the target takes its statement, refuses its rows;
    the channel's position stands after the statement, inside the group."""
    writer = rs.members[0].database()
    try:
        writer.execute(f"CREATE TABLE `{s}`.copied (PRIMARY KEY (id)) "
                       f"SELECT id, name FROM `{s}`.items")
    finally:
        writer.close()
    wait_for(lambda: "not_yet" in cluster.pipeline_state(channel).last_error, 90,
             "the target to refuse the copied rows")


def test_a_create_select_whose_rows_were_not_loaded_is_read_again_on_the_promoted_replica(
        sandbox: Sandbox, replica_set: ReplicaSet, tmp_path: Path) -> None:
    """CREATE TABLE … SELECT is one GTID group: the statement, then its rows. The target
    takes the statement and refuses the rows (a CHECK, for the while); the node is killed,
    the primary crashes and the replica is promoted. The target's position after the
    statement is before the group by GTID, so the new primary's stream gives the rows again."""
    rs, target = replica_set, Database(sandbox, "target")
    shapes = shapes_on(sandbox, rs, target)
    s = shapes.schema
    items_and_a_held_copy(rs, target, s)
    cluster = Cluster(sandbox, tmp_path / "cluster", "switch-ctas")
    try:
        start(cluster, sandbox, rs, shapes, "switchctas", "copied", ddl_sync=True)
        shapes.start()
        shapes.wait_transactions(50)
        create_select_refused(cluster, rs, s, "switchctas")
        cluster.nodes[1].kill()
        shapes.pause()
        rs.wait_caught_up(1)
        rs.kill(0)
        rs.promote(1)
        target.execute(f"ALTER TABLE `{s}`.copied DROP CONSTRAINT not_yet")
        shapes.start()
        cluster.start_node(2)
        if cluster.channel_status("switchctas") == "PAUSE":
            cluster.set_status("switchctas", "START")
        finished_on_the_new_primary(cluster, rs, shapes, "switchctas")
        new_primary = rs.members[1].database()
        try:
            wait_equal(new_primary, target, s, ["copied"], 60)
        finally:
            new_primary.close()
    finally:
        shapes.stop()
        cluster.stop()
        target.close()


def test_a_domain_the_old_primary_never_had_stops_the_switch_until_told(
        sandbox: Sandbox, replica_set: ReplicaSet, tmp_path: Path, capsys: Any) -> None:
    """A local write on the replica in a GTID domain of its own (SET gtid_domain_id = 7)
    was never on the old primary. After a planned switch, a resume at the old primary's
    GTID state would get it from the new primary's binlog start: the pipeline pauses naming
    the domain and the position sets that send or leave it out, the target without it.
    Told to leave it out, the pipeline goes on at the new primary; with the workload running
    throughout, the target equals it as multisets (the replica's own row taken off there)."""
    rs, target = replica_set, Database(sandbox, "target")
    shapes = shapes_on(sandbox, rs, target)
    cluster = Cluster(sandbox, tmp_path / "cluster", "switch-errant")
    t = f"`{shapes.schema}`.kl"
    try:
        start(cluster, sandbox, rs, shapes, "switcherrant")
        shapes.start()
        shapes.wait_transactions(150)
        shapes.pause()
        replica = rs.members[1].database()
        replica.execute("SET SESSION gtid_domain_id = 7")
        replica.execute(f"INSERT INTO {t} VALUES (3000, 'errant')")
        replica.close()
        old = rs.members[0].database()
        old.execute("SET GLOBAL read_only = ON")
        old.close()
        rs.wait_caught_up(1)
        rs.promote(1)
        cluster.call("SwitchSource", manager_pb2.SwitchSourceRequest(
            name="source", to=rs.members[1].address))
        shapes.start()  # on the new primary, racing the pause
        wait_for(lambda: cluster.channel_status("switcherrant") == "PAUSE", 90,
                 "the pipeline to pause on domain 7")
        error = cluster.pipeline_state("switcherrant").last_error
        assert "GTID domain 7" in error and "up to 7-42-1" in error, error
        assert target.rows(f"SELECT COUNT(*) FROM {t} WHERE a = 3000")[0][0] == 0
        leave_out = re.search(r"to leave them out, setl position set (\S+) --gtid (\S+) "
                              r"--replay", error)
        assert leave_out, error
        cluster.set_status("switcherrant", "STOP")
        wait_for(lambda: cluster.pipeline_state("switcherrant").owner_node == 0, 60,
                 "the pipeline to stop")
        assert cli.main(["--manager", cluster.manager_address, "position", "set",
                         leave_out[1], "--gtid", leave_out[2], "--replay"]) == 0, \
            capsys.readouterr()
        new = rs.members[1].database()
        new.script("SET SESSION sql_log_bin = 0", f"DELETE FROM {t} WHERE a = 3000")
        new.close()
        cluster.set_status("switcherrant", "START")
        cluster.wait_running("switcherrant")
        finished_on_the_new_primary(cluster, rs, shapes, "switcherrant")
        assert target.rows(f"SELECT COUNT(*) FROM {t} WHERE a = 3000")[0][0] == 0
    finally:
        shapes.stop()
        cluster.stop()
        target.close()
