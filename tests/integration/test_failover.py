"""The promises under the failures a production pipeline meets, end to end on real servers:
the owning node killed (the other candidate takes over), a deadlock on
the target (Load retries), binlog rotation with a restart in between, a start position the
source has purged (a pause that says what to do), and a source restart. (The owner frozen
past its ZooKeeper session, and kill -9 at random points: test_exactly_once.py.)

While writes race the failure, a watcher reads the target in consistent snapshots and
checks what a reader relies on: a source transaction is seen whole or not at all, and a row
never goes back. Every test ends with source and target compared equal.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator

import pytest

from shared.sandbox import Sandbox, pid_alive
from tests.devcluster import (
    Cluster,
    Database,
    make_schema,
    one_way,
    wait_equal,
    wait_for,
)
from tests.integration.shapes import Shapes, beside, channel, start_channel


@pytest.fixture
def pair(sandbox: Sandbox) -> Iterator[tuple[Database, Database]]:
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    yield source, target
    source.close()
    target.close()


def owner(cluster: Cluster, channel: str) -> int:
    def running_on() -> int:
        state = cluster.pipeline_state(channel)
        return state.owner_node if state.state == "running" else 0
    return wait_for(running_on, 90, f"a node running {channel}")


def test_the_owner_killed_mid_stream_the_other_node_takes_over(sandbox, pair, tmp_path):
    """Over every table shape a replay breaks (keyless with duplicates, a unique-key swap,
    transfers under a sum, a cascading foreign key), compared as multisets."""
    source, target = pair
    shapes = Shapes(sandbox, source, target, seed=23)
    cluster = Cluster(sandbox, tmp_path, "failover")
    try:
        start_channel(cluster, shapes, "failover", nodes=2, batch_timeout_ms=50)
        first = owner(cluster, "failover")
        shapes.start()
        shapes.wait_transactions(300)
        cluster.nodes[first].kill()  # kill -9 in the middle of batches
        second = wait_for(lambda: owner(cluster, "failover") != first and
                          owner(cluster, "failover"), 90, "the other node to take over")
        shapes.wait_transactions(shapes.transactions + 300)  # while the second owns it
        shapes.finish(source)
        assert second != first
        assert "event=pipeline_started pipeline=failover.forward" in \
            cluster.nodes[second].output()
    finally:
        shapes.stop()
        cluster.stop()


def test_a_source_redefined_mid_stream_restarts_its_pipeline_and_loses_nothing(
        sandbox, pair, tmp_path):
    """``setl apply`` of a changed source (its switch_after_s here) restarts every pipeline
    that uses it, in the middle of batches: over the keyless, unique-swap and sum tables,
    written all along, equal as multisets at the end."""
    source, target = pair
    shapes = Shapes(sandbox, source, target, seed=29)
    cluster = Cluster(sandbox, tmp_path, "redefined")
    try:
        start_channel(cluster, shapes, "redefined", batch_timeout_ms=50)
        node = cluster.nodes[1]
        shapes.start()
        shapes.wait_transactions(200)
        servers = sandbox.servers()
        cluster.apply([channel("redefined", shapes.schema, batch_timeout_ms=50)], [
            {"name": name, "host": "127.0.0.1", "port": servers[name].port, "user": "setl",
             "password": f"file:{sandbox.secret_file}",
             **({"switch_after_s": 11} if name == "source" else {})}
            for name in ("source", "target")])
        wait_for(lambda: node.output().count(
            "event=pipeline_assigned pipeline=redefined.forward") >= 2, 90,
            "the pipeline started again with the source's new definition")
        shapes.wait_transactions(shapes.transactions + 200)  # after the restart
        shapes.finish(source)
    finally:
        shapes.stop()
        cluster.stop()


def test_a_deadlock_on_the_target_is_retried_and_nothing_is_lost(sandbox, pair, tmp_path):
    """The retry loads the batch again: with the keyless, unique-swap and sum tables in the
    same pipeline, written all along, equal as multisets at the end."""
    source, target = pair
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.ledger (id INT PRIMARY KEY, "
                         "counter INT NOT NULL)")
    target.execute(f"CREATE TABLE `{schema}`.ballast (id INT PRIMARY KEY, n INT NOT NULL)")
    target.execute(f"INSERT INTO `{schema}`.ballast SELECT seq, 0 FROM `{schema}`.seq_1_to_2000")
    for db in (source, target):
        db.execute(f"INSERT INTO `{schema}`.ledger VALUES (1, 0), (2, 0)")
    shapes = Shapes(sandbox, source, target, seed=83)
    cluster = Cluster(sandbox, tmp_path, "deadlock")
    blocker = Database(sandbox, "target")
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        cluster.apply([beside(one_way("deadlock", schema, ["ledger"], batch_timeout_ms=20),
                              shapes.schema)])
        cluster.set_status("deadlock", "START")
        cluster.wait_running("deadlock")
        shapes.start()
        # another writer of the target holds row 2 and has done much work (so InnoDB picks
        # Load's transaction as the deadlock's victim)
        blocker.execute("BEGIN")
        blocker.execute(f"UPDATE `{schema}`.ballast SET n = n + 1")
        blocker.execute(f"UPDATE `{schema}`.ledger SET counter = counter WHERE id = 2")
        source.execute("BEGIN")
        source.execute(f"UPDATE `{schema}`.ledger SET counter = 10 WHERE id = 1")
        source.execute(f"UPDATE `{schema}`.ledger SET counter = 20 WHERE id = 2")
        source.execute("COMMIT")
        wait_for(lambda: target.rows("SELECT COUNT(*) FROM information_schema.innodb_trx "
                                     "WHERE trx_state = 'LOCK WAIT'")[0][0] == 1, 60,
                 "Load to wait for row 2")
        blocker.execute(f"UPDATE `{schema}`.ledger SET counter = counter WHERE id = 1")
        blocker.execute("ROLLBACK")  # the other writer changes nothing in the end
        wait_equal(source, target, schema, ["ledger"])
        shapes.keep_on()
        shapes.finish(source)
        log = node.output()
        assert re.search(r"event=load_retry pipeline=deadlock.forward .*Deadlock", log), log[-3000:]
        assert "event=pipeline_failed pipeline=deadlock.forward" not in log
    finally:
        shapes.stop()
        blocker.close()
        cluster.stop()


def test_binlog_rotation_across_a_restart_and_a_purged_start_position(sandbox, pair, tmp_path):
    """Over a keyless table with duplicate rows: a restart that replayed rows would show. The
    keyless, unique-swap and sum tables in the same pipeline are written all along, through
    the rotations and the restart: equal as multisets."""
    source, target = pair
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.ledger (id INT, "
                         "counter INT NOT NULL)")
    t = f"`{schema}`.ledger"
    shapes = Shapes(sandbox, source, target, seed=89)
    cluster = Cluster(sandbox, tmp_path, "rotation")
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        cluster.apply([beside(one_way("rotation", schema, ["ledger"], batch_timeout_ms=20),
                              shapes.schema)])
        cluster.set_status("rotation", "START")
        cluster.wait_running("rotation")
        shapes.start()
        first_file = source.rows("SHOW MASTER STATUS")[0][0]
        for n in range(1, 301):
            source.execute(f"INSERT INTO {t} VALUES ({n % 7}, 0), ({n % 7}, 0)")
            if n % 100 == 0:
                source.execute("FLUSH BINARY LOGS")  # the binlog moves on to a new file
            if n == 150:
                assert node.terminate() == 0  # a clean stop between two rotations
                node = cluster.start_node(1)
        wait_equal(source, target, schema, ["ledger"])
        shapes.keep_on()
        shapes.finish(source)
        file = target.rows("SELECT binlog_file FROM retl.retl_position WHERE pipeline_id = "
                           "'rotation.forward'")[0][0]
        assert file > first_file, "the position did not follow the rotation"
        cluster.set_status("rotation", "STOP")

        # a channel asked to start where the source no longer has its binlog
        gone = source.rows("SHOW MASTER STATUS")[0][:2]
        source.execute(f"INSERT INTO {t} VALUES (1000, 0)")
        source.execute("FLUSH BINARY LOGS")
        current = source.rows("SHOW MASTER STATUS")[0][0]

        def purged() -> bool:  # a file a binlog reader still holds is kept: try again
            source.execute(f"PURGE BINARY LOGS TO '{current}'")
            return gone[0] not in [row[0] for row in source.rows("SHOW BINARY LOGS")]
        wait_for(purged, 60, f"the source to purge {gone[0]}", 0.5)
        cluster.apply([one_way("purged", schema, ["ledger"],
                               start={"file": gone[0], "pos": int(gone[1])})])
        cluster.set_status("purged", "START")
        wait_for(lambda: cluster.channel_status("purged") == "PAUSE", 90,
                 "the pipeline to pause")
        error = cluster.pipeline_state("purged").last_error or node.output()
        assert f"binlog file {gone[0]} is not on the source any more (oldest is {current})" \
            in error, error
        assert "copy the paired tables again" in error
        assert node.output().count("event=pipeline_failed pipeline=purged.forward") == 0

        # a GTID start whose transactions are in purged files: the server refuses the dump
        # (the paused channel stopped first: two channels writing one table are not let run)
        cluster.set_status("purged", "STOP")
        cluster.apply([one_way("purged-gtid", schema, ["ledger"], start={"gtid": "0-11-1"})])
        cluster.set_status("purged-gtid", "START")
        wait_for(lambda: cluster.channel_status("purged-gtid") == "PAUSE", 90,
                 "the GTID pipeline to pause")
        log = node.output()
        assert "event=pipeline_failed pipeline=purged-gtid.forward" not in log
        paused = re.search(r"event=pipeline_paused pipeline=purged-gtid.forward error=(.*)", log)
        assert paused, log[-3000:]
        assert "source source cannot send its binlog from" in paused[1]
        assert f"the oldest binlog it keeps is {current}" in paused[1]
        assert "copy the paired tables again" in paused[1]
    finally:
        shapes.stop()
        cluster.stop()


def test_a_source_restart_mid_stream_loses_nothing(sandbox, tmp_path):
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    shapes = Shapes(sandbox, source, target, seed=29)
    cluster = Cluster(sandbox, tmp_path, "restart")
    try:
        start_channel(cluster, shapes, "restart", batch_timeout_ms=50)
        shapes.start()
        shapes.wait_transactions(500)
        shapes.pause()  # the writer stops; the pipeline is still reading behind it
        pid = sandbox.servers()["source"].pid
        source.close()
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not pid_alive(pid), 60, "the source to stop")
        sandbox.up()  # the same port and data
        source = Database(sandbox, "source")
        written = shapes.transactions
        shapes.start()
        shapes.wait_transactions(written + 300)
        shapes.finish(source)
        assert sandbox.servers()["source"].pid != pid
    finally:
        shapes.stop()
        cluster.stop()
        source.close()
        target.close()
