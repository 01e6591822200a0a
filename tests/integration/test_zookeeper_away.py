"""ZooKeeper going away never hangs, kills or doubles a daemon (issue 19), on real servers:
daemons started before ZooKeeper wait and then serve; a node and a manager asked to stop
while ZooKeeper is down, or a node while Spark starts, exit within seconds; a node whose
session expires while its pipeline starts or runs ends up with one runner. Every test ends
with the data compared equal.

Tests that stop ZooKeeper run their own server (the sandbox's is shared by the whole run)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from shared import zk
from shared.sandbox import Sandbox
from tests.devcluster import (
    SESSION_TIMEOUT_S,
    Cluster,
    Daemon,
    Database,
    ZooKeeperServer,
    frozen_past_session,
    make_schema,
    one_way,
    wait_equal,
    wait_for,
)
from tests.integration.shapes import Shapes, beside
from tests.tcpproxy import Relay

STOP_BOUND_S = 20  # "within a few seconds", with room for a busy 2-core machine
TABLE = "CREATE TABLE `{schema}`.ledger (id INT PRIMARY KEY, counter INT NOT NULL)"
PIPELINE_EVENT = re.compile(r"event=pipeline_(started|stopped|failed|fenced|paused) "
                            r"pipeline=(\S+)")


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path / "zookeeper")
    yield server
    server.kill()


def write_rows(db: Database, schema: str, first: int, count: int) -> None:
    """``count`` transactions: an insert each, and an update of an earlier row."""
    for n in range(first, first + count):
        db.execute("BEGIN")
        db.execute(f"INSERT INTO `{schema}`.ledger VALUES ({n}, 1)")
        db.execute(f"UPDATE `{schema}`.ledger SET counter = counter + 1 WHERE id = {n // 2}")
        db.execute("COMMIT")


def run_ledger(cluster: Cluster, channel: str, source: Database, target: Database, schema: str,
               shapes: Shapes, sources: list[dict[str, object]] | None = None) -> None:
    """Apply and start a channel on the ledger and the workload's tables, the workload
    written from then on; the ledger's first 100 rows arrive."""
    cluster.apply([beside(one_way(channel, schema, ["ledger"], batch_timeout_ms=50),
                          shapes.schema)], sources)
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    shapes.start()
    write_rows(source, schema, 1, 100)
    wait_equal(source, target, schema, ["ledger"])


def terminate_within(daemon: Daemon, bound_s: float = STOP_BOUND_S) -> int:
    """SIGTERM, then the exit code; fails the test if the process is still there after
    ``bound_s`` (and aborts it with a second SIGTERM, as an operator would)."""
    daemon.process.terminate()
    try:
        return daemon.process.wait(bound_s)
    except Exception:
        daemon.process.terminate()
        raise AssertionError(f"{daemon.args[0]} still running {bound_s}s after SIGTERM; "
                             f"log:\n{daemon.output()[-3000:]}") from None


def each_table_loaded(target: Database, schema: str) -> bool:
    """Every table of the Shapes workload shows a loaded change on the target."""
    t = f"`{schema}`"
    return all(target.rows(sql)[0][0] for sql in (
        f"SELECT COUNT(*) FROM {t}.kl", f"SELECT COUNT(*) FROM {t}.sl WHERE slot <> id",
        f"SELECT SUM(version) FROM {t}.accounts", f"SELECT COUNT(*) FROM {t}.parent",
        f"SELECT COUNT(*) FROM {t}.child", f"SELECT COUNT(*) FROM {t}.audit"))


def one_runner_at_a_time(log: str, pipeline_id: str) -> list[str]:
    """The pipeline's start/end events in the node's log; fails if a runner started while
    another one had not ended (two ``pipeline_started`` without an end between them)."""
    events = [found[1] for found in PIPELINE_EVENT.finditer(log) if found[2] == pipeline_id]
    running = False
    for event in events:
        assert not (event == "started" and running), f"two runners of {pipeline_id}: {events}"
        running = event == "started"
    return events


def test_daemons_wait_for_zookeeper_at_start_and_stop_within_seconds_while_it_is_gone(
        sandbox: Sandbox, tmp_path: Path, own_zookeeper: ZooKeeperServer) -> None:
    """The keyless, unique-swap and sum tables of the same pipeline are written through
    ZooKeeper's loss, the stops and the restarts: equal as multisets at the end."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, TABLE)
    shapes = Shapes(sandbox, source, target, seed=101)
    cluster = Cluster(sandbox, tmp_path, "zkaway", zk_hosts=own_zookeeper.address,
                      zk_settings={"connect_timeout_s": 1}, spark_start="boot")
    try:
        # 1. manager and node started before ZooKeeper: they wait and say so, then serve
        cluster.start_manager(wait=False)
        node = cluster.start_node(1, wait=False)
        for daemon in (cluster.manager, node):
            assert daemon is not None
            wait_for(lambda d=daemon: "event=zk_waiting" in d.output(), 30,
                     f"{daemon.args[0]} to say that it waits for ZooKeeper")
            assert daemon.alive(), daemon.output()
        own_zookeeper.start()
        cluster.wait_manager()
        cluster.wait_node(1)
        run_ledger(cluster, "zkaway", source, target, schema, shapes)

        # 2. ZooKeeper gone: the pipeline goes on; SIGTERM still ends both daemons at once
        own_zookeeper.kill()
        write_rows(source, schema, 101, 100)
        wait_equal(source, target, schema, ["ledger"])
        assert terminate_within(node) == 0
        assert "event=node_stopped node=1" in node.output()
        assert cluster.manager is not None
        assert terminate_within(cluster.manager) == 0

        # 3. ZooKeeper back: a node stopped while Spark starts exits as quickly; the next
        # one resumes from the target's position, nothing lost
        write_rows(source, schema, 201, 100)
        own_zookeeper.start()
        cluster.start_manager()
        earlier = node.output()  # (every life of node 1 writes one log)
        starting = cluster.start_node(1)
        wait_for(lambda: starting.output().count("event=spark_starting") >
                 earlier.count("event=spark_starting"), 60, "Spark to be starting")
        assert starting.output().count("event=spark_started") == \
            earlier.count("event=spark_started")
        assert terminate_within(starting) == 0
        cluster.start_node(1)
        cluster.wait_running("zkaway")
        write_rows(source, schema, 301, 100)
        wait_equal(source, target, schema, ["ledger"])
        shapes.finish(source)
    finally:
        shapes.stop()
        cluster.stop()
        source.close()
        target.close()


def test_a_node_stops_within_seconds_while_its_target_does_not_answer(
        sandbox: Sandbox, tmp_path: Path, zk_hosts: str) -> None:
    """The target silent (connections open, nothing answers) while rows wait to be loaded:
    SIGTERM still ends the node within seconds; the next node loads what was left: the
    keyless, unique-swap and sum tables of the same pipeline too, written until the target
    holds some of them back and again through the restart, equal as multisets."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, TABLE)
    shapes = Shapes(sandbox, source, target, seed=103)
    servers = sandbox.servers()
    relay = Relay(servers["target"].port)
    cluster = Cluster(sandbox, tmp_path, "targetgone")
    sources = [{"name": name, "host": "127.0.0.1", "port": port, "user": "setl",
                "password": f"file:{sandbox.secret_file}"}
               for name, port in (("source", servers["source"].port), ("target", relay.port))]
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        run_ledger(cluster, "targetgone", source, target, schema, shapes, sources)
        # every table of the workload loaded once, so E/T read their facts off the target
        # before it goes silent: this test is about the load's stop. (A first read of a
        # table's facts while it is silent held an E/T worker the interpreter joined at
        # exit; the node now leaves such a worker, tests/unit/test_lifecycle.py, but only
        # after every stop step's bound, which together come close to STOP_BOUND_S.)
        wait_for(lambda: each_table_loaded(target, shapes.schema), 60,
                 "a change of every workload table on the target")

        # the target stops answering while rows keep coming: the node cannot load them
        relay.freeze()
        write_rows(source, schema, 101, 100)
        wait_for(relay.held.is_set, 60, "the node to send the target something it holds back")
        shapes.pause()  # (a backlog of the whole stop would start Spark for the catch-up)
        assert node.alive(), node.output()[-3000:]
        assert terminate_within(node) == 0
        assert "event=node_stopped node=1" in node.output()

        # the target back: a new node loads what the stopped one could not, nothing lost
        relay.thaw()
        cluster.start_node(1)
        shapes.start()
        cluster.wait_running("targetgone")
        write_rows(source, schema, 201, 50)
        wait_equal(source, target, schema, ["ledger"])
        shapes.keep_on()
        shapes.finish(source)
    finally:
        shapes.stop()
        cluster.stop()
        relay.close()
        source.close()
        target.close()


def test_a_session_lost_while_the_pipeline_starts_or_runs_leaves_one_runner(
        sandbox: Sandbox, tmp_path: Path, zk_client: KazooClient) -> None:
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, TABLE)
    shapes = Shapes(sandbox, source, target, seed=31)  # through both losses, in the pipeline
    cluster = Cluster(sandbox, tmp_path, "expiry", spark_start="boot")
    node_entry = zk.ZkPaths(cluster.root).node(1)

    def expire_session(node: Daemon) -> None:
        with frozen_past_session(node, lambda: zk_client.exists(node_entry),
                                 SESSION_TIMEOUT_S + 20):
            pass

    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        definition = one_way("expiry", schema, ["ledger"], batch_timeout_ms=50)
        cluster.apply([beside(definition, shapes.schema)])
        cluster.set_status("expiry", "START")
        shapes.start()
        # 1. as the runner starts, Spark still starting beside it
        wait_for(lambda: "event=pipeline_started pipeline=expiry.forward" in node.output(), 60,
                 "the runner to start")
        expire_session(node)
        wait_for(lambda: node.output().count("event=zk_session_lost") == 1, 30,
                 "the node to see its session lost")
        cluster.wait_running("expiry")
        write_rows(source, schema, 1, 100)
        wait_equal(source, target, schema, ["ledger"])

        # 2. while it runs, with transactions arriving
        writer = Database(sandbox, "source")
        busy = threading.Thread(target=write_rows, args=(writer, schema, 101, 400), daemon=True)
        busy.start()
        expire_session(node)
        wait_for(lambda: node.output().count("event=zk_session_lost") == 2, 30,
                 "the node to see its session lost again")
        busy.join(120)
        assert not busy.is_alive(), "the writer did not finish"
        writer.close()
        wait_for(lambda: one_runner_at_a_time(node.output(), "expiry.forward")
                 .count("started") >= 2, 60, "a runner of the new session")
        write_rows(source, schema, 501, 50)
        wait_equal(source, target, schema, ["ledger"])
        shapes.finish(source)

        log = node.output()
        one_runner_at_a_time(log, "expiry.forward")
        assert "same server_uuid/server_id" not in log
        assert node.alive()
    finally:
        shapes.stop()
        cluster.stop()
        source.close()
        target.close()
