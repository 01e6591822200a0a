"""kill -9 of a node in the middle of a catch-up, then a restart: nothing is lost, nothing is
applied twice — on a keyless table with duplicate rows, a unique-key swap and a sum as much
as on a keyed table (kill -9 in a stream, over every table shape: test_exactly_once.py)."""

from __future__ import annotations

import threading

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for

SLOTS, ACCOUNTS, OPENING = 10, 20, 1000
SHAPES = ("CREATE TABLE `{schema}`.ledger (id INT PRIMARY KEY, counter INT NOT NULL, "
          "tag VARCHAR(80))",
          "CREATE TABLE `{schema}`.kl (a INT, b VARCHAR(20))",  # keyless, duplicate rows
          "CREATE TABLE `{schema}`.sl (id INT PRIMARY KEY, slot INT NOT NULL, UNIQUE KEY u "
          "(slot))",  # values swapped through a free one
          "CREATE TABLE `{schema}`.acct (id INT PRIMARY KEY, bal INT NOT NULL)")  # a sum
TABLES = ["ledger", "kl", "sl", "acct"]


def watch_sum(sandbox, schema: str, stop: threading.Event, seen: list[str],
              reads: list[int]) -> None:
    """Read the target in consistent snapshots: the balances always sum to the total."""
    db = Database(sandbox, "target")
    try:
        while not stop.is_set():
            db.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            total = db.rows(f"SELECT SUM(bal) FROM `{schema}`.acct")[0][0]
            slots = [row[0] for row in db.rows(f"SELECT slot FROM `{schema}`.sl ORDER BY 1")]
            db.execute("COMMIT")
            reads.append(1)
            if total != ACCOUNTS * OPENING or slots != list(range(1, SLOTS + 1)):
                seen.append(f"part of a transaction: sum {total}, slots {slots}")
            stop.wait(0.02)
    finally:
        db.close()


def test_kill_9_in_the_middle_of_a_catch_up_then_restart_leaves_target_equal(sandbox, tmp_path):
    """A backlog (bulk inserts, then small transactions, each moving money between two
    accounts, swapping two unique slots through a free value and adding two equal rows to a
    keyless table) caught up in big batches; the node killed when the first of them are on
    the target; the restart ends equal, compared as multisets, and a reader of the target
    never saw part of a transaction."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, *SHAPES)
    t = f"`{schema}`.ledger"
    for db in (source, target):
        db.execute(f"INSERT INTO `{schema}`.sl VALUES " + ", ".join(
            f"({i}, {i})" for i in range(1, SLOTS + 1)))
        db.execute(f"INSERT INTO `{schema}`.acct VALUES " + ", ".join(
            f"({i}, {OPENING})" for i in range(ACCOUNTS)))
    cluster = Cluster(sandbox, tmp_path, "catchup")
    stop, seen, reads = threading.Event(), [], []
    watcher = threading.Thread(target=watch_sum, args=(sandbox, schema, stop, seen, reads),
                               daemon=True)
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        cluster.apply([one_way("catchup", schema, TABLES)])
        cluster.set_status("catchup", "START")
        cluster.wait_running("catchup")
        cluster.set_status("catchup", "STOP")
        wait_for(lambda: cluster.pipeline_state("catchup").state == "not running", 30, "stop")
        source.execute(f"USE `{schema}`")  # seq_1_to_N lives in the current database
        for first in range(0, 200_000, 10_000):  # the backlog: bulk transactions
            source.execute("BEGIN")
            source.execute(f"INSERT INTO {t} SELECT seq, 0, CONCAT('bulk ', seq, ' ', "
                           f"REPEAT('x', 60)) FROM seq_{first + 1}_to_{first + 10_000}")
            source.execute(f"INSERT INTO `{schema}`.kl SELECT seq % 50, 'bulk' FROM "
                           "seq_1_to_500")  # the same 50 rows ten times over
            source.execute("COMMIT")
        source.execute(f"CREATE PROCEDURE `{schema}`.churn() BEGIN DECLARE n INT DEFAULT 0; "
                       "DECLARE a INT; DECLARE b INT; DECLARE sa INT; DECLARE sb INT; "
                       "WHILE n < 5000 DO START TRANSACTION; "
                       f"UPDATE {t} SET counter = counter + 1, tag = CONCAT('oltp ', n) "
                       "WHERE id = 1 + (n * 7919) % 200000; "
                       f"DELETE FROM {t} WHERE id = 1 + (n * 104729) % 200000; "
                       f"UPDATE `{schema}`.acct SET bal = bal - 7 WHERE id = n % {ACCOUNTS}; "
                       f"UPDATE `{schema}`.acct SET bal = bal + 7 WHERE id = (n + 3) % "
                       f"{ACCOUNTS}; "
                       f"SET a = 1 + n % {SLOTS}, b = 1 + (n + 4) % {SLOTS}; "
                       f"SELECT slot INTO sa FROM `{schema}`.sl WHERE id = a; "
                       f"SELECT slot INTO sb FROM `{schema}`.sl WHERE id = b; "
                       f"UPDATE `{schema}`.sl SET slot = -1 WHERE id = a; "
                       f"UPDATE `{schema}`.sl SET slot = sa WHERE id = b; "
                       f"UPDATE `{schema}`.sl SET slot = sb WHERE id = a; "
                       f"INSERT INTO `{schema}`.kl VALUES (n % 9, 'oltp'), (n % 9, 'oltp'); "
                       "COMMIT; SET n = n + 1; END WHILE; END")
        source.execute(f"CALL `{schema}`.churn()")  # a transaction an iteration
        watcher.start()
        cluster.set_status("catchup", "START")
        wait_for(lambda: target.rows(f"SELECT COUNT(*) FROM {t}")[0][0] > 0, 120,
                 "the catch-up under way", interval_s=0.02)
        node.kill()  # in the middle of the catch-up
        mid = target.rows(f"SELECT COUNT(*) FROM {t}")[0][0]
        assert 0 < mid < 200_000 - 5000, f"the kill was not in the middle ({mid} rows)"
        again = cluster.start_node(1)
        wait_equal(source, target, schema, TABLES, timeout_s=180)
        stop.set()
        watcher.join(30)
        assert seen == [] and len(reads) > 20, (seen[:5], len(reads))
        # a bulk transaction's rows events are ~800 KiB: they went beside their Spark task
        assert "task of very large size" not in node.output() + again.output()
    finally:
        stop.set()
        cluster.stop()
        source.close()
        target.close()
