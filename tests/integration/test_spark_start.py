"""Spark starts beside the stream, not before it: a pipeline's batches run in the node while
Spark starts, and a Spark that cannot start still stops the pipeline with the reason."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pyspark

from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside, channel

LEDGER = "CREATE TABLE `{schema}`.ledger (id INT PRIMARY KEY, note VARCHAR(40))"


def test_on_demand_spark_starts_with_the_first_batch_that_needs_it(
        sandbox: Sandbox, tmp_path) -> None:
    """``spark.start: on_demand``: a caught-up stream's small batches run in the node and
    start no Spark; the first batch over ``local_max_rows`` starts it and waits for it."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, LEDGER)
    cluster = Cluster(sandbox, tmp_path, "ondemand", local_max_rows=100)
    ledger = f"`{schema}`.ledger"
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        cluster.apply([one_way("ondemand", schema, ["ledger"])])
        cluster.set_status("ondemand", "START")
        cluster.wait_running("ondemand")
        for row in range(1, 51):
            source.execute(f"INSERT INTO {ledger} VALUES ({row}, 'one by one')")
        wait_equal(source, target, schema, ["ledger"])
        assert "event=spark_starting" not in node.output()

        # (a batch's rows are estimated from its events' bytes as learned from one-row events,
        # headers and all: 5,000 rows may count as ~1,300, still well over 100)
        source.execute(f"INSERT INTO {ledger} SELECT seq, 'at once' FROM `{schema}`.seq_51_to_5050")
        wait_equal(source, target, schema, ["ledger"])
        assert "event=spark_started" in node.output()
    finally:
        cluster.stop()
        source.close()
        target.close()


def test_a_pipeline_streams_while_spark_cannot_start_then_pauses_saying_why(
        sandbox: Sandbox, tmp_path) -> None:
    """No Spark at all (a master it cannot parse): the workload's transactions still reach
    the target, in the node; each attempt fails once Spark's start has failed, and after
    ``max_retries`` the channel pauses with Spark's error however many batches loaded. A node
    with a working Spark then goes on from the targets' positions: every table equal as a
    multiset, no reader of the target ever saw part of a transaction."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    shapes = Shapes(sandbox, source, target, seed=43)
    cluster = Cluster(sandbox, tmp_path, "nospark", spark_master="no-such-master",
                      spark_start="boot")
    accounts = f"`{shapes.schema}`.accounts"
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        cluster.apply([channel("nospark", shapes.schema, max_retries=1)])
        cluster.set_status("nospark", "START")
        shapes.start()
        wait_for(lambda: target.rows(f"SELECT SUM(version) FROM {accounts}")[0][0] > 0, 60,
                 "a transfer on the target, loaded without Spark")
        # two attempts, each launching a JVM that fails: on 2 cores shared with the other
        # test groups that took over 120 s in CI
        wait_for(lambda: cluster.channel_status("nospark") == "PAUSE", 300,
                 "the channel to pause")
        state = cluster.pipeline_state("nospark")
        assert state.state == "failed"
        assert "Spark did not start (master no-such-master)" in state.last_error
        assert "check Java 17 and the 'spark' section of the node config" in state.last_error
        assert "event=spark_started" not in node.output()

        assert node.terminate() == 0
        cluster.spark_master = "local[2]"
        cluster.start_node(1)
        cluster.set_status("nospark", "START")
        cluster.wait_running("nospark")
        shapes.finish(source)
    finally:
        shapes.stop()
        cluster.stop()
        source.close()
        target.close()


def large_insert_beside_shapes(sandbox: Sandbox, seed: int, make: Callable[[], Cluster],
                               name: str, timeout_s: float, kill: bool = False) -> str:
    """The workload's tables and a ledger in one channel of a cluster ``make`` gives: while
    the workload runs, a 5,000-row insert into the ledger (one batch far over the cluster's
    ``local_max_rows``; with ``kill``, the node is killed -9 as soon as it is written and
    started again, and a second one follows); every table equal at the end as multisets,
    no reader of the target saw part of a transaction. The node's log."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    shapes = Shapes(sandbox, source, target, seed=seed)
    for db in (source, target):
        db.execute(LEDGER.format(schema=shapes.schema))
    cluster = make()
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        cluster.apply([beside(one_way(name, shapes.schema, ["ledger"]), shapes.schema)])
        cluster.set_status(name, "START")
        cluster.wait_running(name)
        shapes.start()
        shapes.wait_transactions(20)
        source.execute(f"INSERT INTO `{shapes.schema}`.ledger SELECT seq, 'at once' "
                       f"FROM `{shapes.schema}`.seq_1_to_5000")
        if kill:  # wherever that batch is: read, in E/T, in Load's transaction, loaded
            node.kill()
            node = cluster.start_node(1)
            source.execute(f"INSERT INTO `{shapes.schema}`.ledger SELECT seq, 'again' "
                           f"FROM `{shapes.schema}`.seq_5001_to_10000")
        wait_equal(source, target, shapes.schema, ["ledger"], timeout_s=timeout_s)
        shapes.wait_transactions(shapes.transactions + 20)
        wait_for(lambda: shapes.snapshots > 20, timeout_s, "the watcher's reads of the target")
        shapes.finish(source, timeout_s=timeout_s)
        return node.output()
    finally:
        shapes.stop()
        cluster.stop()
        source.close()
        target.close()


def test_a_batch_over_local_max_rows_runs_in_the_node_while_spark_starts(
        sandbox: Sandbox, tmp_path: Path) -> None:
    """Spark still starting (``start: boot`` on a standalone master that takes the connection
    and never answers: Spark gives up only after its registration retries, a minute): no
    batch waits for it. A 5,000-row insert, far over ``local_max_rows``, reaches the target
    through Extract/Transform in the node, beside the workload's transactions, and Spark has
    not started. The node is killed -9 right after that insert and started again (Spark
    starting again, as slowly): the restart's batches, a second large insert among them,
    run in the node too, and nothing is lost or applied twice. (Before, the large batch, and
    every batch after it, waited for the start and failed with it.)"""
    silent = socket.socket()  # a master that accepts (the kernel's backlog) and says nothing
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        log = large_insert_beside_shapes(sandbox, 47, lambda: Cluster(
            sandbox, tmp_path, "slowspark", local_max_rows=100, spark_start="boot",
            spark_master=f"spark://127.0.0.1:{silent.getsockname()[1]}"), "slowspark", 50,
            kill=True)
    finally:
        silent.close()
    assert "event=spark_starting master=spark://127.0.0.1:" in log
    assert "event=spark_not_ready_batches_in_node master=spark://127.0.0.1:" in log
    assert log.count("event=node_started node=1") == 2  # the log file holds both runs
    assert "event=spark_started" not in log
    assert "event=pipeline_failed" not in log


def test_a_gateway_that_exits_at_launch_is_launched_again(sandbox: Sandbox,
                                                          tmp_path: Path) -> None:
    """The first launch of Spark's gateway JVM exits at once with nothing said (pyspark's
    JAVA_GATEWAY_EXITED, seen on busy machines): the node launches it again, and the batch
    that started Spark (``start: on_demand``, the large insert) waits for the second launch
    instead of failing the pipeline."""
    real = Path(pyspark.__file__).parent
    home, once = tmp_path / "spark-home", tmp_path / "launched-once"
    (home / "bin").mkdir(parents=True)
    submit = home / "bin" / "spark-submit"  # exits the first time, then is Spark's own
    submit.write_text(f"#!/bin/sh\nif [ ! -e {once} ]; then touch {once}; exit 1; fi\n"
                      f"SPARK_HOME={real} exec {real}/bin/spark-submit \"$@\"\n")
    submit.chmod(0o755)
    log = large_insert_beside_shapes(sandbox, 53, lambda: Cluster(
        sandbox, tmp_path, "relaunch", local_max_rows=100, env={"SPARK_HOME": str(home)}),
        "relaunch", 120)
    assert "event=pipeline_failed" not in log
    assert once.exists()
    assert "event=spark_launch_retry master=local[2] attempt=1" in log
    assert "event=spark_started" in log
