"""A running pipeline whose central free door's connection to its buffer is lost (its
server's ``wait_timeout``, a proxy, a restart: here a KILL from another session) while a
table is copied in its stream: the copy's next window failed to poll the buffer
(``snapshot_failed``, the pipeline's last error), and a delete of served requests in the
Load thread failed the pipeline. It goes on a new connection; the stream, the copy and
the requests go on with nothing failed, and every table ends equal to the source."""

from __future__ import annotations

from manager import cli
from tests.devcluster import Cluster, Database, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside
from tests.integration.test_freedoor import request_rows, without_binlog

BIG = "CREATE TABLE `{schema}`.big (id INT PRIMARY KEY, name VARCHAR(40), qty INT)"


def kill_setl_connections(db: Database) -> list[int]:
    """Every connection of setl's user on ``db``'s server but this one."""
    ids = [int(row[0]) for row in db.rows(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = SUBSTRING_INDEX(USER(), "
        "'@', 1) AND ID <> CONNECTION_ID()")]
    for connection_id in ids:
        db.execute(f"KILL CONNECTION {connection_id}")
    return ids


def test_a_central_doors_connection_lost_while_a_table_is_copied_fails_nothing(
        cluster: Cluster, source: Database, target: Database) -> None:
    cluster.sandbox.up(second_target=True)
    shapes = Shapes(cluster.sandbox, source, target, seed=31, kinds=3)
    schema = shapes.schema
    for db in (source, target):
        db.execute(BIG.format(schema=schema))
    without_binlog(source, f"USE `{schema}`", f"INSERT INTO `{schema}`.big SELECT seq, "
                   "CONCAT('row ', seq), seq % 100 FROM seq_1_to_40000")
    servers = cluster.sandbox.servers()
    sources = [{"name": name, "host": "127.0.0.1", "port": servers[name].port, "user": "setl",
                "password": f"file:{cluster.sandbox.secret_file}"}
               for name in ("source", "target", "target2")]
    cluster.apply([beside(one_way("recon", schema, ["big"], snapshot_chunk_size=50,
                                  free_door={"source": "target2"}), schema)], sources)
    cluster.set_status("recon", "START")
    cluster.wait_running("recon")
    buffer = Database(cluster.sandbox, "target2")
    shapes.start()
    try:
        shapes.wait_transactions(20)
        assert cli.main(["--manager", cluster.manager_address, "snapshot", "recon",
                         "--table", f"{schema}.big"]) == 0

        def copying() -> bool:
            copies = list(cluster.pipeline_state("recon").snapshots)
            return bool(copies) and copies[0].state == "copying" and copies[0].chunks_done > 0
        wait_for(copying, 60, "the copy under way")
        node = cluster.nodes[1]
        assert kill_setl_connections(buffer), "the door's connection"
        # the copy's next window polls the buffer on the door's connection
        wait_for(lambda: "event=free_door_reconnect channel=recon pipeline=forward" in
                 node.output() or "event=snapshot_failed pipeline=recon" in node.output(),
                 60, "the door to meet its connection lost")
        [big] = cluster.pipeline_state("recon").snapshots
        assert big.state == "copying", big  # (the connection was lost while it copied)
        request_rows(buffer, f"{schema}.big", [(i,) for i in range(1, 200)],
                     channel="recon", pipeline="forward")
        wait_for(lambda: buffer.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE CHANNEL_ID "
                                     "= 'recon'") == [(0,)], 120, "the requests served")
        assert kill_setl_connections(buffer), "the door's connection"
        request_rows(buffer, f"{schema}.big", [(i,) for i in range(200, 400)],
                     channel="recon", pipeline="forward")
        wait_for(lambda: buffer.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE CHANNEL_ID "
                                     "= 'recon'") == [(0,)], 120, "the requests served")
        wait_for(lambda: [copy.state for copy in cluster.pipeline_state("recon").snapshots]
                 == ["done"], 300, "the copy done")
        shapes.keep_on()
        shapes.finish(source)
    finally:
        shapes.stop()
        buffer.close()
    wait_equal(source, target, schema, ["big"], 120)
    log = cluster.nodes[1].output()
    assert "event=free_door_reconnect channel=recon pipeline=forward" in log
    assert "event=snapshot_failed pipeline=recon" not in log
    assert "event=pipeline_failed pipeline=recon" not in log
    assert log.count("event=pipeline_started pipeline=recon.forward") == 1
    assert cluster.pipeline_state("recon").last_error == ""
    cluster.set_status("recon", "STOP")


def test_loads_connection_killed_while_it_waits_for_a_lock_goes_on_a_new_one(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A DBA's ``KILL CONNECTION`` of Load's session while it waits for a row lock, part
    way into a batch's transaction: the batch rolled back with it, so it goes once more on
    a new connection (the position row read first tells it what committed) — not a failed
    pipeline, nothing applied twice. The workload's tables wait behind it in the same
    batches and end equal as multisets."""
    shapes = Shapes(cluster.sandbox, source, target, seed=61, kinds=3)
    schema = shapes.schema
    for db in (source, target):
        db.execute(BIG.format(schema=schema))
    cluster.apply([beside(one_way("klock", schema, ["big"]), schema)])
    cluster.set_status("klock", "START")
    cluster.wait_running("klock")
    source.execute(f"INSERT INTO `{schema}`.big VALUES (1, 'first', 1)")
    wait_for(lambda: target.table(schema, "big"), 60, "the first row on the target")
    holder = Database(cluster.sandbox, "target")
    shapes.start()
    try:
        holder.execute("BEGIN")
        holder.rows(f"SELECT * FROM `{schema}`.big WHERE id = 1 FOR UPDATE")
        source.execute(f"UPDATE `{schema}`.big SET qty = 2 WHERE id = 1")
        [(waiting,)] = wait_for(lambda: target.rows(
            "SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX WHERE trx_state = "
            "'LOCK WAIT'"), 60, "Load waiting for the held row")
        target.execute(f"KILL CONNECTION {waiting}")
        holder.execute("ROLLBACK")
        source.execute(f"INSERT INTO `{schema}`.big VALUES (2, 'after', 2)")
        shapes.keep_on(40)
        shapes.finish(source)
    finally:
        shapes.stop()
        holder.close()
    wait_equal(source, target, schema, ["big"], 60)
    log = cluster.nodes[1].output()
    assert "event=load_reconnect pipeline=klock.forward" in log
    assert "event=pipeline_failed pipeline=klock.forward" not in log
    assert log.count("event=pipeline_started pipeline=klock.forward") == 1
