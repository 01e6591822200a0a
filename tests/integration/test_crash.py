"""kill -9 of a node in the middle of a stream, then a restart: nothing is lost, nothing is
applied twice in a way that leaves the target different from the source."""

from __future__ import annotations

import random
import threading
import time

from shared.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for


def test_kill_9_mid_stream_then_restart_leaves_target_equal(sandbox, tmp_path):
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.ledger (id INT PRIMARY KEY, "
                         "counter INT NOT NULL, tag VARCHAR(20))")
    cluster = Cluster(sandbox, tmp_path, "crash")
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        cluster.apply([one_way("crash", schema, ["ledger"], batch_size=100, batch_timeout_ms=20)])
        cluster.set_status("crash", "START")
        cluster.wait_running("crash")

        stop = threading.Event()
        written = []

        def workload() -> None:
            writer = Database(sandbox, "source")
            rng = random.Random(7)
            n = 0
            while not stop.is_set() and n < 100_000:  # stop ends it
                n += 1
                time.sleep(0.001)  # about 1,000 transactions a second
                key = rng.randrange(400)
                writer.execute("BEGIN")
                writer.execute(f"INSERT INTO `{schema}`.ledger VALUES ({key}, 1, 'w{n}') "
                               "ON DUPLICATE KEY UPDATE counter = counter + 1, tag = VALUES(tag)")
                if n % 5 == 0:
                    writer.execute(f"DELETE FROM `{schema}`.ledger WHERE id = {rng.randrange(400)}")
                writer.execute("COMMIT")
                written.append(n)
            writer.close()

        thread = threading.Thread(target=workload, daemon=True)
        thread.start()
        wait_for(lambda: len(target.table(schema, "ledger")) > 50, 60, "replication under way")
        node.kill()  # no clean-up at all, in the middle of batches
        killed_at = len(written)
        wait_for(lambda: len(written) >= killed_at + 200, 60,
                 "the workload to go on while no node runs")
        first_run = len(node.output())
        restarted = cluster.start_node(1)
        wait_for(lambda: "event=pipeline_started pipeline=crash.forward"
                 in restarted.output()[first_run:], 90, "the restarted node to run the pipeline")
        restarted_at = len(written)
        wait_for(lambda: len(written) >= restarted_at + 200, 60,
                 "the workload to go on while the restarted node runs")
        stop.set()
        thread.join(120)
        assert not thread.is_alive(), "the workload did not stop"
        assert len(written) > 1000
        wait_equal(source, target, schema, ["ledger"], timeout_s=120)
    finally:
        cluster.stop()
        source.close()
        target.close()


def test_kill_9_in_the_middle_of_a_catch_up_then_restart_leaves_target_equal(sandbox, tmp_path):
    """A backlog (bulk inserts, then one-row transactions) caught up in big batches; the
    node killed when the first of them are on the target; the restart ends equal."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.ledger (id INT PRIMARY KEY, "
                         "counter INT NOT NULL, tag VARCHAR(80))")
    t = f"`{schema}`.ledger"
    cluster = Cluster(sandbox, tmp_path, "catchup")
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        cluster.apply([one_way("catchup", schema, ["ledger"])])
        cluster.set_status("catchup", "START")
        cluster.wait_running("catchup")
        cluster.set_status("catchup", "STOP")
        wait_for(lambda: cluster.pipeline_state("catchup").state == "not running", 30, "stop")
        source.execute(f"USE `{schema}`")  # seq_1_to_N lives in the current database
        for first in range(0, 200_000, 10_000):  # the backlog: bulk transactions
            source.execute(f"INSERT INTO {t} SELECT seq, 0, CONCAT('bulk ', seq, ' ', "
                           f"REPEAT('x', 60)) FROM seq_{first + 1}_to_{first + 10_000}")
        source.execute(f"CREATE PROCEDURE `{schema}`.churn() BEGIN DECLARE n INT DEFAULT 0; "
                       "WHILE n < 5000 DO "
                       f"UPDATE {t} SET counter = counter + 1, tag = CONCAT('oltp ', n) "
                       "WHERE id = 1 + (n * 7919) % 200000; "
                       f"DELETE FROM {t} WHERE id = 1 + (n * 104729) % 200000; "
                       "SET n = n + 1; END WHILE; END")
        source.execute(f"CALL `{schema}`.churn()")  # autocommit: one transaction a statement
        cluster.set_status("catchup", "START")
        wait_for(lambda: target.rows(f"SELECT COUNT(*) FROM {t}")[0][0] > 0, 120,
                 "the catch-up under way", interval_s=0.02)
        node.kill()  # in the middle of the catch-up
        mid = target.rows(f"SELECT COUNT(*) FROM {t}")[0][0]
        assert 0 < mid < 200_000 - 5000, f"the kill was not in the middle ({mid} rows)"
        again = cluster.start_node(1)
        wait_equal(source, target, schema, ["ledger"], timeout_s=180)
        # a bulk transaction's rows events are ~800 KiB: they went beside their Spark task
        assert "task of very large size" not in node.output() + again.output()
    finally:
        cluster.stop()
        source.close()
        target.close()
