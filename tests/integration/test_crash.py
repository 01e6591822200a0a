"""kill -9 of a node in the middle of a catch-up, then a restart: nothing is lost, nothing is
applied twice (kill -9 in a stream, over every table shape: test_exactly_once.py)."""

from __future__ import annotations

from shared.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for


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
